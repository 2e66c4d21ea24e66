"""A local Bot API server (``telegram-bot-api --local``) named by COURIER_TELEGRAM_API_URL, with
COURIER_TELEGRAM_LOCAL_MODE on: a result beyond Telegram's 50 MB (up to 2000 MB) goes as files, and a
user's picture is read from the server's disk (python-telegram-bot's ``local_mode``: ``getFile``
gives a path here, not one to download). The bot is the one ``build_application`` makes, against
the emulator in local mode; the public one still refuses such a file (413)."""

import io

import pytest
from PIL import Image

from comfyui_courier.bot.delivery import deliver_file
from comfyui_courier.bot.service import build_application
from comfyui_courier.bot.sink import TelegramSink
from comfyui_courier.core.config import load_settings
from comfyui_courier.emulator.botapi import BotApiEmulator
from comfyui_courier.jobs.ports import UploadTooLarge

pytestmark = pytest.mark.timeout(120)

USER = 4242
VIDEO_BYTES = 60 * 1000 * 1000  # beyond the public Bot API's 50 MB


def mp4(size: int) -> bytes:
    """An MP4 of ``size`` bytes as a muxer writes one: ``ftyp``, then the ``mdat`` box (no frames to show)."""
    ftyp = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2"
    return ftyp + (size - len(ftyp)).to_bytes(4, "big") + b"mdat" + bytes(size - len(ftyp) - 8)


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), "teal").save(buffer, "PNG")
    return buffer.getvalue()


def settings_for(emulator: BotApiEmulator, token: str, **env):
    return load_settings(None, {"TELEGRAM_BOT_TOKEN": token, "COURIER_TELEGRAM_API_URL": emulator.url, **env})


async def test_a_60_mb_video_goes_to_a_local_bot_api_server_as_files(store, tmp_path):
    async with BotApiEmulator(local=True) as local:
        emulated = local.add_bot()
        photo = emulated.inject_photo(USER, png())["photo"][-1]
        settings = settings_for(local, emulated.token, COURIER_TELEGRAM_LOCAL_MODE="1")
        assert settings.upload_limit_mb == 2000  # a result is announced "too large" beyond this only
        data = mp4(VIDEO_BYTES)
        on_disk = tmp_path / "card.png"
        on_disk.write_bytes(png())
        async with build_application(settings, store) as application:
            assert application.bot.local_mode is True
            record = await deliver_file(application.bot, USER, None, "clip.mp4", data)
            picture = await TelegramSink(application.bot, 3.0, None).fetch_file(photo["file_id"])
            by_path = await application.bot.send_document(USER, on_disk)  # named by its file:// URI, not uploaded
        (video,) = [call for call in emulated.calls if call.method == "sendVideo"]
        (document,) = [call for call in emulated.calls if call.method == "sendDocument" and call.files]
        assert record["kind"] == "video" and video.status == 200 and document.status == 200
        assert emulated.file_bytes(document.result["document"]["file_id"]) == data
        assert video.result["video"]["file_size"] == VIDEO_BYTES
        (got,) = [call for call in emulated.calls if call.method == "getFile"]
        assert got.result["file_path"].startswith(str(local.working_dir))  # a path on this machine, read from disk
        assert picture == emulated.file_bytes(photo["file_id"])
        assert emulated.file_bytes(by_path.document.file_id) == on_disk.read_bytes()
        (named,) = [call for call in emulated.calls if call.method == "sendDocument" and not call.files]
        assert named.params["document"] == on_disk.as_uri()


async def test_the_public_bot_api_refuses_the_same_video(botapi, botapi_bot, store):
    async with build_application(settings_for(botapi, botapi_bot.token), store) as application:
        assert application.bot.local_mode is False
        with pytest.raises(UploadTooLarge):
            await deliver_file(application.bot, USER, None, "clip.mp4", mp4(VIDEO_BYTES))
