"""``python <pack> try``: the whole chain on one machine, used in a browser.

Starts the Bot API emulator in this process with one bot and its web chat, then
this ComfyUI (``main.py`` of the folder the pack is installed in) with the bot
pointed at the emulator and Courier's state in a throwaway directory, waits until
``/courier/health`` is ok and prints one line: the chat's URL. Ctrl-C or SIGTERM
says what it stops, stops ComfyUI (which stops its embedded PostgreSQL and anon), waits
until they are gone, stops the emulator and removes the throwaway data.

``/img`` works out of the box: the tiny random-weight checkpoint and LoRA (``tiny_models.py``;
their pictures are noise) are written once into a folder of ``try``'s own
(``<ComfyUI>/user/courier-try/tiny-models``, or ``--tiny-models DIR``) and reused, and ComfyUI
reads it through an ``--extra-model-paths-config`` of this run, so the user's models folder is
left alone. ComfyUI runs with ``--preview-method auto`` (a live preview in the chat while it
samples) unless the arguments after ``--`` choose a method.

With ``--anyone`` a private Anyone network runs here too (the tests' one), ComfyUI
is published on it as a hidden service with client authorization, and the bot
reaches ComfyUI only at that ``.anon`` address. Courier's settings are the
defaults whatever the environment or ``courier.toml`` say, so a real bot's token or
database is never touched.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import getpass
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import aiohttp

from ..core.config import Secret, Settings

PACK_DIR = Path(__file__).absolute().parent.parent
BOT_ID = 1000000001
"""Fixed, so a ``--keep`` database keeps knowing the bot; its token's secret is new each run (``bot_token``)."""
READY_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 30.0
POLL_S = 0.5
TINY_MODELS_DIR = Path("user") / "courier-try" / "tiny-models"
"""Under the ComfyUI folder: where ``try`` keeps the tiny models between runs (not ComfyUI's models/)."""
TINY_MODELS_TIMEOUT_S = 600.0
PREVIEW_METHOD = "auto"  # ComfyUI's TAESD where its decoder is there, else latent2rgb


class TryError(Exception):
    """Why ``try`` cannot go on, in one line."""


@dataclasses.dataclass
class Options:
    port: int
    comfyui_port: int
    comfyui_dir: Path
    anyone: bool
    keep: bool
    comfyui_args: list[str]
    timeout: float
    tiny_models: Path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python <comfyui-courier folder> try",
        description="Start the Bot API emulator and this ComfyUI with the bot on it; chat with it in a browser.")
    parser.add_argument("--port", type=int, default=8081, help="the web chat's (and emulator's) port (default 8081)")
    parser.add_argument("--comfyui-port", type=int, default=8188, help="ComfyUI's port (default 8188)")
    parser.add_argument("--comfyui-dir", type=Path, default=PACK_DIR.parent.parent,
                        help="the ComfyUI folder (default: the one whose custom_nodes holds this pack)")
    parser.add_argument("--anyone", action="store_true",
                        help="also run a private Anyone network; the bot reaches ComfyUI as its hidden service")
    parser.add_argument("--keep", action="store_true",
                        help="keep Courier's state (database included) in <ComfyUI>/user/courier-try")
    parser.add_argument("--tiny-models", type=Path, default=None, metavar="DIR",
                        help="where the tiny models for /img are written once and reused "
                             f"(default <ComfyUI>/{TINY_MODELS_DIR})")
    parser.add_argument("--timeout", type=float, default=READY_TIMEOUT_S,
                        help=f"seconds to wait for /courier/health to be ok (default {READY_TIMEOUT_S:.0f})")
    parser.add_argument("comfyui_args", nargs="*", metavar="-- ARGS",
                        help="arguments for ComfyUI's main.py after -- (default: --listen 127.0.0.1)")
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # one line on the terminal, not the emulator's access log
    comfyui_dir = args.comfyui_dir.absolute()
    options = Options(args.port, args.comfyui_port, comfyui_dir, args.anyone, args.keep,
                      args.comfyui_args or ["--listen", "127.0.0.1"], args.timeout,
                      (args.tiny_models or comfyui_dir / TINY_MODELS_DIR).absolute())
    try:
        return asyncio.run(run(options))
    except TryError as error:
        print(f"try: {error}", file=sys.stderr, flush=True)
        return 1


async def run(options: Options) -> int:
    """Brings the chain up, serves until SIGINT or SIGTERM, tears down what it started."""
    if not (options.comfyui_dir / "main.py").is_file():
        raise TryError(f"no ComfyUI in {options.comfyui_dir} (no main.py there); name its folder with --comfyui-dir")
    for port, option in ((options.port, "--port"), (options.comfyui_port, "--comfyui-port")):
        check_port_free(port, option)
    anon = find_anon_binary(options.comfyui_dir) if options.anyone else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    scratch = Path(tempfile.mkdtemp(prefix="courier-try-"))
    data_dir = options.comfyui_dir / "user" / "courier-try" if options.keep else scratch / "courier"
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(remove_data, scratch, None if options.keep else data_dir)
        emulator = await start_emulator(options.port)
        stack.push_async_callback(emulator.stop)
        env = courier_environment(emulator.url, emulator.bots[0].token, data_dir)
        env["COURIER_MINIAPP_URL"] = f"http://127.0.0.1:{options.comfyui_port}/courier/miniapp/"  # /app's form
        if anon is not None:
            network = await start_private_network(anon, scratch / "privnet")
            stack.push_async_callback(network.stop)
            env.update(await publish_hidden_service(network, anon, data_dir))
        log_path = (data_dir if options.keep else scratch) / "comfyui.log"
        options.comfyui_args, said = await asyncio.to_thread(with_device, options.comfyui_args, probe_accelerators)
        if said:
            print(said, flush=True)
        options.comfyui_args = with_preview(options.comfyui_args) + await tiny_models(options.tiny_models, scratch)
        comfyui = start_comfyui(options, env, log_path)
        stack.push_async_callback(stop_comfyui, comfyui, data_dir)
        waiting = asyncio.ensure_future(wait_healthy(comfyui, log_path, options, env["COURIER_ADMIN_TOKEN"],
                                                     anyone=anon is not None))
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait((waiting, stopping), return_when=asyncio.FIRST_COMPLETED)
        if waiting.done():  # else stopped while ComfyUI was starting
            print(ready_line(options.port, waiting.result()), flush=True)
            await stopping
        waiting.cancel()
        print(stopping_line(anyone=anon is not None), flush=True)
    print("try: stopped" + (f"; Courier's data is kept in {data_dir}" if options.keep else ""), flush=True)
    return 0


def stopping_line(*, anyone: bool) -> str:
    """What Ctrl-C stops, said at once: stopping takes a few seconds (ComfyUI, then its PostgreSQL)."""
    parts = "ComfyUI, its PostgreSQL" + (", anon and the private Anyone network" if anyone else "")
    return f"try: stopping {parts} and the web chat (a few seconds; Ctrl-C again does not hurry it)"


def check_port_free(port: int, option: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp and ComfyUI bind
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise TryError(f"port {port} is in use; choose another with {option}") from None


def find_anon_binary(comfyui_dir: Path) -> Path:
    """The anon that ComfyUI's Courier would find (``find_anon``: the one lookup); a TryError without one."""
    from ..anyone.install import find_anon

    anon = find_anon(os.environ.get("COURIER_ANON_BINARY", ""), comfyui_dir / "user" / "courier")
    if anon is None or not anon.is_file():
        raise TryError("--anyone needs the anon binary, which is not installed: run "
                       "`python custom_nodes/<this pack> install-anon` (or set COURIER_ANON_BINARY)")
    return anon


async def start_emulator(port: int):
    from ..emulator.botapi import BotApiEmulator

    emulator = BotApiEmulator("127.0.0.1", port)
    try:
        await emulator.start()
    except OSError as error:
        raise TryError(f"the web chat cannot listen on port {port}: {error.strerror}; "
                       "choose another with --port") from None
    emulator.add_bot(bot_token(), username="courier_try_bot", first_name="Courier")
    return emulator


def bot_token() -> str:
    """A random token per run: a web page cannot guess it, so it cannot reach the bot's side of the emulator."""
    return f"{BOT_ID}:{secrets.token_urlsafe(27)[:35]}"


def courier_environment(api_url: str, token: str, data_dir: Path) -> dict[str, str]:
    """ComfyUI's environment: every Courier setting at its default, but the bot's token, API and data, every
    user allowed (the emulator's chat users are the only ones there are), and an admin token of this run's
    own (a hidden service's health, the onion address included, is told only to its holder)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("COURIER_", "TELEGRAM_"))}
    for field in dataclasses.fields(Settings):
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        if isinstance(default, bool):
            env[field.metadata["env"]] = "1" if default else "0"
        elif isinstance(default, (Secret, list)):
            env[field.metadata["env"]] = ""  # courier.toml cannot fill it in either
        else:
            env[field.metadata["env"]] = str(default)
    env.update(TELEGRAM_BOT_TOKEN=token, COURIER_TELEGRAM_API_URL=api_url, COURIER_DATA_DIR=str(data_dir),
               COURIER_PROGRESS_INTERVAL_S="1", COURIER_ALLOWED_USERS="*",
               COURIER_ADMIN_TOKEN=secrets.token_urlsafe(32), PYTHONUNBUFFERED="1")
    return env


async def start_private_network(anon: Path, workdir: Path):
    from ..anyone.errors import PrivateNetworkError
    from ..anyone.privnet import PrivateNetwork

    network = PrivateNetwork(anon, workdir)
    try:
        await network.start()
    except PrivateNetworkError as error:
        raise TryError(f"the private Anyone network did not come up: {str(error).splitlines()[0]}") from None
    return network


async def publish_hidden_service(network, anon: Path, data_dir: Path) -> dict[str, str]:
    """Keys and the ``bot-host`` client made ahead, so the bot's backend can be the ``.anon`` address."""
    from ..anyone.hidden_service import HiddenService

    network.write_test_network(data_dir)
    service = HiddenService(data_dir / "anyone", client_auth=True)
    await service.provision(anon, data_dir / "anyone" / "client_auth")
    return {"COURIER_ANYONE": "1", "COURIER_ANYONE_AGREE_TO_TERMS": "1", "COURIER_ANON_BINARY": str(anon),
            "COURIER_BACKENDS": f"http://{service.address}"}


ACCELERATOR_PROBE = """\
import json, torch
xpu, mps = getattr(torch, "xpu", None), getattr(torch.backends, "mps", None)
print(json.dumps({"cuda": torch.cuda.is_available(), "xpu": bool(xpu and xpu.is_available()),
                  "mps": bool(mps and mps.is_available())}))
"""
PROBE_TIMEOUT_S = 120.0


def probe_accelerators() -> dict[str, bool] | None:
    """Which of torch's accelerators ComfyUI's Python (this one: ``start_comfyui`` runs it) can use,
    asked in a subprocess so this process never imports torch; None if the probe itself failed."""
    try:
        done = subprocess.run([sys.executable, "-c", ACCELERATOR_PROBE], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_S, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def with_device(comfyui_args: list[str], probe: Callable[[], dict[str, bool] | None]) -> tuple[list[str], str | None]:
    """ComfyUI's arguments plus ``--cpu`` when ``probe()`` finds no accelerator (not asked when
    ``--cpu`` is there already), and the line saying so. A failed probe (no torch, say) adds
    nothing: ComfyUI then tells what is wrong itself."""
    if "--cpu" in comfyui_args:
        return comfyui_args, None
    accelerators = probe()
    if accelerators is None or any(accelerators.values()):
        return comfyui_args, None
    return [*comfyui_args, "--cpu"], ("try: ComfyUI's Python sees no GPU (torch finds no CUDA, XPU or MPS device): "
                                      "starting ComfyUI with --cpu, which is slow")


def with_preview(comfyui_args: list[str]) -> list[str]:
    """ComfyUI's arguments with a live preview while it samples, unless they choose a method themselves."""
    if any(arg == "--preview-method" or arg.startswith("--preview-method=") for arg in comfyui_args):
        return comfyui_args
    return [*comfyui_args, "--preview-method", PREVIEW_METHOD]


async def tiny_models(dest: Path, scratch: Path) -> list[str]:
    """ComfyUI's arguments that add ``dest``'s tiny checkpoint and LoRA to its model folders, written there
    first unless they are already (``python <pack> tiny-models``, in a subprocess: this process never
    imports torch); none, and a line saying why, when they cannot be written."""
    from .tiny_models import CHECKPOINT, LORA

    if not (dest / CHECKPOINT).is_file():
        print(f"try: writing the tiny models for /img into {dest} (once; their pictures are noise)", flush=True)
    try:
        await asyncio.to_thread(subprocess.run, [sys.executable, str(PACK_DIR), "tiny-models", "--dest", str(dest)],
                                capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                timeout=TINY_MODELS_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError) as error:
        why = getattr(error, "stderr", None) or str(error)
        print(f"try: the tiny models could not be written ({why.strip().splitlines()[-1]}): /img will say it "
              "has no checkpoint", flush=True)
        return []
    config = scratch / "extra_model_paths.yaml"
    folders = {"base_path": str(dest), "checkpoints": str(CHECKPOINT.parent), "loras": str(LORA.parent)}
    config.write_text(json.dumps({"courier_try": folders}), encoding="utf-8")  # JSON is YAML
    return ["--extra-model-paths-config", str(config)]


def start_comfyui(options: Options, env: dict[str, str], log_path: Path) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(options.comfyui_dir / "main.py"), "--port", str(options.comfyui_port),
               *options.comfyui_args]
    with open(log_path, "ab") as log:
        # its own process group: a terminal's Ctrl-C reaches us, and we stop ComfyUI in order
        return subprocess.Popen(command, cwd=options.comfyui_dir, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


async def wait_healthy(comfyui: subprocess.Popen, log_path: Path, options: Options, admin_token: str, *,
                       anyone: bool) -> dict:
    """Until the bot, the dispatcher (and Anyone) are ok: their health; ComfyUI's exit or the timeout is a TryError."""
    url = f"http://127.0.0.1:{options.comfyui_port}/courier/health"
    wanted = ("database", "bot", "dispatcher", *(("anyone",) if anyone else ()))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + options.timeout
    components: dict = {}
    async with aiohttp.ClientSession(trust_env=False, headers={"Authorization": f"Bearer {admin_token}"}) as http:
        while True:
            if comfyui.poll() is not None:
                kept = f"its log: {log_path}" if options.keep else "--keep keeps its log"
                raise TryError(f"ComfyUI exited with code {comfyui.returncode} before it was ready: "
                               f"{last_line(log_path)} ({kept})")
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                async with http.get(url, timeout=aiohttp.ClientTimeout(total=5)) as reply:
                    if reply.status == 404:  # ComfyUI serves once every custom node has loaded
                        raise TryError(f"ComfyUI in {options.comfyui_dir} runs without this pack "
                                       "(no /courier/health); is the pack in its custom_nodes?")
                    components = (await reply.json()).get("components", {}) if reply.status == 200 else components
            if all(components.get(name, {}).get("state") == "ok" for name in wanted):
                return components
            if components.get("database", {}).get("state") == "error":
                raise TryError(f"Courier's database did not start: {components['database'].get('reason')}")
            if loop.time() > deadline:
                waiting = "; ".join(f"{name}: {components.get(name, {}).get('state', 'no answer')} "
                                    f"({components.get(name, {}).get('reason', '')})" for name in wanted
                                    if components.get(name, {}).get("state") != "ok")
                raise TryError(f"ComfyUI was not ready within {options.timeout:.0f} s: {waiting or 'no answer'}")
            await asyncio.sleep(POLL_S)


def last_line(log_path: Path) -> str:
    """The log's last line that says something (a traceback ends with the error)."""
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "it wrote no log"
    return lines[-1] if lines else "it wrote nothing"


def ready_line(port: int, health: dict) -> str:
    """The chat's URL (and the hidden service's); over SSH, also how to open the chat from the local machine."""
    url = f"http://127.0.0.1:{port}/"
    line = f"Courier is ready: chat with the bot at {url} (Ctrl-C stops everything)"
    if onion := health.get("anyone", {}).get("onion_address"):
        line += f"; the bot reaches ComfyUI as http://{onion}"
    if ssh := os.environ.get("SSH_CONNECTION", "").split():
        host = ssh[2] if len(ssh) >= 3 else "<this machine>"
        line += f"; from your computer: ssh -N -L {port}:127.0.0.1:{port} {getpass.getuser()}@{host}, then open {url}"
    return line


async def stop_comfyui(comfyui: subprocess.Popen, data_dir: Path) -> None:
    """Ctrl-C to ComfyUI's group, SIGKILL after STOP_TIMEOUT_S; then until its PostgreSQL has stopped."""
    from ..store.pgwatch import postmaster

    with contextlib.suppress(ProcessLookupError):
        os.killpg(comfyui.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        await asyncio.to_thread(comfyui.wait, STOP_TIMEOUT_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(comfyui.pid, signal.SIGKILL)  # and whatever it left in its group
    await asyncio.to_thread(comfyui.wait)
    pgdata = (data_dir / "postgres").resolve()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STOP_TIMEOUT_S
    while postmaster(pgdata) is not None and loop.time() < deadline:  # its watcher stops it (store/pgwatch.py)
        await asyncio.sleep(POLL_S)


def remove_data(scratch: Path, data_dir: Path | None) -> None:
    """The throwaway directory and, unless kept, the database the embedded PostgreSQL linked from it."""
    from ..store.embedded import remove_cluster

    if data_dir is not None:
        remove_cluster(data_dir / "postgres")
    shutil.rmtree(scratch, ignore_errors=True)
