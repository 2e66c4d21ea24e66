"""One "Done in" per job (issue 31, item 3): counted once, from the command's arrival to its last
file; the result's caption and the job's status message never say two numbers (they said 510.5 s
and 510.8 s: the caption counted before the upload, the status after the job was recorded). Real
python-telegram-bot on the Bot API emulator, real PostgreSQL, the fake ComfyUI."""

import asyncio

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import running_courier

USER = 3131
UPLOAD_S = 1.0
"""How long Telegram takes the result's photo: the time between the two counts today."""


@pytest.mark.timeout(120)
async def test_the_status_and_the_caption_say_the_same_done_in(botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    fake_comfy.steps, fake_comfy.step_delay = 3, 0.3
    upload = botapi_bot.hold("sendPhoto")
    done = i18n.text("en", "done", seconds=0).split()[0]
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER), COURIER_LIVE_PREVIEWS="false"):
        botapi_bot.inject_text(USER, "/demo a fox")
        await botapi_bot.wait_for_call("sendDocument", timeout=60)  # the result's first file went
        asyncio.get_running_loop().call_later(UPLOAD_S, upload.set)  # its photo, with the caption, is slow
        photo = await botapi_bot.wait_for_call("sendPhoto", timeout=60)
        status = await botapi_bot.wait_for_call("editMessageText", timeout=60,
                                                where=lambda c: c.params["text"].startswith(done))
    assert photo.params["caption"].startswith(done)
    assert status.params["text"] == photo.params["caption"]
