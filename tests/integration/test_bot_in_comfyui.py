"""The bot inside ComfyUI's own event loop: token set, ComfyUI started, /demo answered.

Everything is real but Telegram: ComfyUI with the pack (embedded PostgreSQL in
its user directory, this ComfyUI as the backend) and python-telegram-bot
talking to the Bot API emulator on 127.0.0.1.
"""

import asyncio
import io
import tempfile
from pathlib import Path

from PIL import Image

from comfyui_courier.tests.fixtures.comfyui import remove_tree


async def test_pack_runs_the_bot_inside_comfyui(comfyui_factory, botapi, botapi_bot):
    data_dir = tempfile.mkdtemp(prefix="courier-")
    try:
        await _runs_the_bot(comfyui_factory, botapi, botapi_bot, data_dir)
    finally:
        remove_tree(Path(data_dir))  # and, run as root, the database linked from it


async def _runs_the_bot(comfyui_factory, botapi, botapi_bot, data_dir):
    env = {"TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
           "COURIER_DATA_DIR": data_dir, "COURIER_ALLOWED_USERS": "*"}
    server = await asyncio.to_thread(comfyui_factory, env=env)  # the emulator keeps answering meanwhile
    try:
        await botapi.wait_for(lambda: any(c.method == "setMyCommands" and c.ok for c in botapi_bot.calls),
                              timeout=60)
    except TimeoutError:
        raise AssertionError(server.log_tail(40)) from None
    request = botapi_bot.inject_text(21, "/demo hello")
    call = await botapi_bot.wait_for_call("sendDocument", timeout=60, where=lambda c: (
        c.result.get("reply_to_message", {}).get("message_id") == request["message_id"]))
    image = Image.open(io.BytesIO(botapi_bot.file_bytes(call.result["document"]["file_id"])))
    assert image.format == "PNG" and image.size == (512, 512)
    assert not image.info.get("prompt") and not image.info.get("workflow")  # no metadata unless opted in
    health = (await asyncio.to_thread(server.get_json, "/courier/health"))["components"]
    assert {health[name]["state"] for name in ("database", "bot", "dispatcher")} == {"ok"}, health
    assert botapi_bot.token not in await asyncio.to_thread(server.log_text)
