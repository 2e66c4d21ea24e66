"""``python <pack folder> run``: the bot without ComfyUI, against a remote backend.

The pack is launched by its folder (whatever it is called), as a user would,
so this also proves the launcher keeps the pack's root off sys.path.
"""

import shutil
from pathlib import Path

from comfyui_courier.tests.support.courier import standalone_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI

PACK_ROOT = Path(__file__).resolve().parent.parent


async def test_standalone_bot_serves_demo_and_stops_on_sigint(botapi, botapi_bot, pg_database, tmp_path):
    folder = tmp_path / "Some-Pack_Name"  # not an importable name: the launcher must not care
    folder.symlink_to(PACK_ROOT)
    async with FakeComfyUI() as comfy, standalone_courier(botapi, botapi_bot, pg_database, comfy.url,
                                                          tmp_path / "data", pack=folder,
                                                          COURIER_ALLOWED_USERS="*") as process:
        request = botapi_bot.inject_text(5, "/demo standalone")
        call = await botapi_bot.wait_for_call("sendDocument", timeout=30, where=lambda c: (
            c.result.get("reply_to_message", {}).get("message_id") == request["message_id"]))
        assert call.result["document"]["file_name"].endswith(".png")
    output = process.output()
    assert process.returncode == 0, output  # stopped by SIGINT
    assert botapi_bot.token not in output and pg_database not in output  # secrets stay out of logs
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
