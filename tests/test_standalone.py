"""``python <pack folder> run``: the bot without ComfyUI, against a remote backend.

The pack is launched by its folder (whatever it is called), as a user would,
so this also proves the launcher keeps the pack's root off sys.path.
"""

import asyncio
import os
import shutil
import signal
import sys
from pathlib import Path

from comfyui_courier.emulator.comfyui_api import FakeComfyUI

PACK_ROOT = Path(__file__).resolve().parent.parent


async def test_standalone_bot_serves_demo_and_stops_on_sigint(botapi, botapi_bot, pg_database, tmp_path):
    folder = tmp_path / "Some-Pack_Name"  # not an importable name: the launcher must not care
    folder.symlink_to(PACK_ROOT)
    async with FakeComfyUI() as comfy:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("COURIER_", "TELEGRAM_"))}
        env.update(TELEGRAM_BOT_TOKEN=botapi_bot.token, COURIER_TELEGRAM_API_URL=botapi.url,
                   COURIER_DATABASE_URL=pg_database, COURIER_BACKENDS=comfy.url)
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(folder), "run", "--data-dir", str(tmp_path / "data"),
            env=env, cwd=str(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            try:
                await botapi.wait_for(lambda: any(c.method == "setMyCommands" and c.ok for c in botapi_bot.calls),
                                      timeout=60)  # a cold interpreter is slow
            except TimeoutError:
                process.send_signal(signal.SIGINT)
                raise AssertionError((await asyncio.wait_for(process.stdout.read(), 30)).decode()) from None
            request = botapi_bot.inject_text(5, "/demo standalone")
            call = await botapi_bot.wait_for_call("sendDocument", timeout=30, where=lambda c: (
                c.result.get("reply_to_message", {}).get("message_id") == request["message_id"]))
            assert call.result["document"]["file_name"].endswith(".png")
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
            output = (await asyncio.wait_for(process.stdout.read(), 30)).decode()
            code = await asyncio.wait_for(process.wait(), 30)
    assert code == 0, output
    assert botapi_bot.token not in output and pg_database not in output  # secrets stay out of logs
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
