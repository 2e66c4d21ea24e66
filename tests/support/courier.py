"""A booted Courier for end-to-end tests: bot on the Bot API emulator, real PostgreSQL, a backend."""

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier


@contextlib.asynccontextmanager
async def running_courier(botapi, botapi_bot, pg_database: str, backend_url: str, data_dir: Path, **env: str):
    """Yields the started Courier (bot and dispatcher ok); ``env`` adds or overrides settings."""
    settings = load_settings(None, {
        "TELEGRAM_BOT_TOKEN": botapi_bot.token,
        "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database,
        "COURIER_PROGRESS_INTERVAL_S": "0",
        **env,
    })
    service = Courier(settings, Path(data_dir), backend_url)
    await service.start()
    try:
        await service.booted()
        assert service.health.state("bot") == "ok", service.health_report()
        assert service.health.state("dispatcher") == "ok", service.health_report()
        yield service
    finally:
        await service.stop()


async def refusals_sent() -> None:
    """Wait until the refusals a running Courier decided to tell have gone (``bot.refusals``: a task
    of this loop sends them, and ends when none is left)."""
    await asyncio.gather(*(task for task in asyncio.all_tasks() if task.get_name() == "courier-refusals"))


def replies_to(request: dict):
    """Whether a Bot API call answers ``request`` (message ids count per chat: the chat must match too)."""
    return lambda call: (call.result.get("chat", {}).get("id") == request["chat"]["id"]
                         and call.result.get("reply_to_message", {}).get("message_id") == request["message_id"])


def shown_text(call) -> str | None:
    """The text a message request shows: its text or caption, or a preview edit's media caption."""
    return call.params.get("text") or call.params.get("caption") or (call.params.get("media") or {}).get("caption")


PACK_ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def standalone_courier(botapi, botapi_bot, pg_database: str, backend_url: str, data_dir: Path,
                             pack: Path = PACK_ROOT, **env: str):
    """Yields a real second process, ``python <pack> run``, once its bot published its command menu
    (or, with ``COURIER_RECEIVE_UPDATES=0``, asked getMe); stopped with SIGINT after (unless the test
    killed it). Its output is in ``process.output()``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("COURIER_", "TELEGRAM_"))}
    environ.update(TELEGRAM_BOT_TOKEN=botapi_bot.token, COURIER_TELEGRAM_API_URL=botapi.url,
                   COURIER_DATABASE_URL=pg_database, COURIER_BACKENDS=backend_url, **env)
    ready_call = "getMe" if env.get("COURIER_RECEIVE_UPDATES") == "0" else "setMyCommands"

    def ready_calls() -> int:
        return sum(call.method == ready_call and call.ok for call in botapi_bot.calls)

    before = ready_calls()
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(pack), "run", "--data-dir", str(data_dir), env=environ, cwd=str(data_dir.parent),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output = bytearray()
    reader = asyncio.create_task(_collect(process.stdout, output))
    process.output = lambda: output.decode(errors="replace")
    try:
        try:
            await botapi.wait_for(lambda: process.returncode is not None or ready_calls() > before, timeout=60)
        except TimeoutError:
            raise AssertionError(f"the Courier process did not start:\n{process.output()}") from None
        assert process.returncode is None, process.output()
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.wait(), 30)
        await asyncio.wait_for(reader, 30)


async def _collect(stream, into: bytearray) -> None:
    while chunk := await stream.read(65536):
        into += chunk
