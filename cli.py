"""Subcommands of ``python <pack folder>``: run the bot standalone, install anon, tools."""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path

from .core.config import CONFIG_FILE_NAME, SettingsError, load_settings
from .core.logs import log_to_console


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python <comfyui-courier folder>",
                                     description="ComfyUI Courier command line")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the bot standalone against ComfyUI backends")
    run.add_argument("--config", type=Path, help=f"a {CONFIG_FILE_NAME} file (default: none)")
    run.add_argument("--data-dir", type=Path, default=Path.home() / ".comfyui-courier",
                     help="where state lives when COURIER_DATA_DIR is unset")
    run.add_argument("--backend", default="http://127.0.0.1:8188",
                     help="ComfyUI server used when COURIER_BACKENDS is unset")
    sub.add_parser("install-anon", help="install the anon binary from the npm package", add_help=False)
    sub.add_parser("emulator", help="run the local Telegram Bot API emulator and its web chat", add_help=False)
    sub.add_parser("try", help="the emulator and this ComfyUI with the bot on it: chat with it in a browser",
                   add_help=False)
    sub.add_parser("anyone-client", help="authorize clients of the hidden service (prints what goes where)",
                   add_help=False)
    sub.add_parser("multi-gpu", help="run one ComfyUI per GPU as backends of one bot", add_help=False)
    sub.add_parser("catalogs", help="check the message catalogs, or port messages into them", add_help=False)
    sub.add_parser("settings", help="print every setting as the table of docs/configuration.md")
    sub.add_parser("tiny-models", help="write a tiny random-weight SD 1.x checkpoint and LoRA (tests, try)",
                   add_help=False)
    args, rest = parser.parse_known_args(argv)
    log_to_console()
    if args.command == "install-anon":
        from .anyone.install import main as install_main

        return install_main(rest)
    if args.command == "emulator":
        from .emulator.botapi import main as emulator_main

        return emulator_main(rest)
    if args.command == "try":
        from .tools.tryout import main as try_main

        return try_main(rest)
    if args.command == "anyone-client":
        from .anyone.hidden_service import main as client_main

        return client_main(rest)
    if args.command == "multi-gpu":
        from .gpu.multi import main as multi_main

        return multi_main(rest)
    if args.command == "catalogs":
        from .tools.catalogs import main as catalogs_main

        return catalogs_main(rest)
    if args.command == "tiny-models":
        from .tools.tiny_models import main as tiny_main

        return tiny_main(rest)
    if args.command == "settings":
        from .core.config import configuration_markdown

        print(configuration_markdown(), end="")
        return 0
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        settings = load_settings(args.config)
    except SettingsError as exc:
        parser.exit(2, f"configuration error: {exc}\n")
    return asyncio.run(_run_standalone(settings, args.data_dir, args.backend))


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
