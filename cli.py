"""Subcommands of ``python <pack folder>``: run the bot standalone, install anon, tools."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

from .core.config import CONFIG_FILE_NAME, SettingsError, load_settings
from .core.logs import log_to_console

SUBCOMMANDS = (  # after ``run``: (name, help); each but ``settings`` hands the rest of the line to ``_tool``
    ("install-anon", "install the anon binary from the npm package"),
    ("emulator", "run the local Telegram Bot API emulator and its web chat"),
    ("try", "the emulator and this ComfyUI with the bot on it: chat with it in a browser"),
    ("anyone-client", "authorize clients of the hidden service (prints what goes where)"),
    ("multi-gpu", "run one ComfyUI per GPU as backends of one bot"),
    ("catalogs", "check the message catalogs, or port messages into them"),
    ("settings", "print every setting as the table of docs/configuration.md"),
    ("tiny-models", "write a tiny random-weight SD 1.x checkpoint and LoRA (tests, try)"),
)


def main(argv: list[str]) -> int:
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    log_to_console()
    if args.command == "settings":
        from .core.config import configuration_markdown

        print(configuration_markdown(), end="")
        return 0
    if args.command != "run":
        return _tool(args.command)(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        settings = load_settings(args.config)
    except SettingsError as exc:
        parser.exit(2, f"configuration error: {exc}\n")
    return asyncio.run(_run_standalone(settings, args.data_dir, args.backend))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python <comfyui-courier folder>",
                                     description="ComfyUI Courier command line")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the bot standalone against ComfyUI backends")
    run.add_argument("--config", type=Path, help=f"a {CONFIG_FILE_NAME} file (default: none)")
    run.add_argument("--data-dir", type=Path, default=Path.home() / ".comfyui-courier",
                     help="where state lives when COURIER_DATA_DIR is unset")
    run.add_argument("--backend", default="http://127.0.0.1:8188",
                     help="ComfyUI server used when COURIER_BACKENDS is unset")
    for name, text in SUBCOMMANDS:  # a tool reads its own options, --help included
        sub.add_parser(name, help=text, add_help=name == "settings")
    return parser


def _tool(command: str) -> Callable[[list[str]], int]:
    """The ``main(argv)`` of a tool subcommand, imported only when that subcommand runs."""
    if command == "install-anon":
        from .anyone.install import main as tool
    elif command == "emulator":
        from .emulator.botapi import main as tool
    elif command == "try":
        from .tools.tryout import main as tool
    elif command == "anyone-client":
        from .anyone.hidden_service import main as tool
    elif command == "multi-gpu":
        from .gpu.multi import main as tool
    elif command == "catalogs":
        from .tools.catalogs import main as tool
    elif command == "tiny-models":
        from .tools.tiny_models import main as tool
    else:
        raise ValueError(f"no tool {command!r}")
    return tool


async def _run_standalone(settings, data_dir: Path, backend: str) -> int:
    from .runtime import Courier

    courier = Courier(settings, Path(settings.data_dir) if settings.data_dir else data_dir, backend)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await courier.start()
    try:
        await stop.wait()
    finally:
        await courier.stop()
    return 0
