"""A command stored before publishing checked file inputs (``jobs/file_inputs.py``) keeps its graph,
and a bot job reaches the local ComfyUI directly (no gateway): its prompt is checked before it is
queued, so a LoadImage naming a picture outside Courier's folders fails the job with the reason and
ComfyUI never reads the file (issue 29).

Real python-telegram-bot on the Bot API emulator, real PostgreSQL, a real ComfyUI whose input folder
holds the picture, so the graph would run (and send it) if it were queued.
"""

import io

import aiohttp
import pytest
from PIL import Image

from comfyui_courier.core import i18n
from comfyui_courier.store import commands
from comfyui_courier.tests.server_routes.helpers import demo_graph
from comfyui_courier.tests.support.courier import replies_to, running_courier, shown_text
from comfyui_courier.tests.support.polling import job_rows, until

USER = 2931
TIMEOUT_S = 120


def leaking_graph() -> dict:
    """The demo graph with a LoadImage of ComfyUI's input folder (not ``courier/``) sent to the chat."""
    graph = demo_graph("old")
    graph["4"] = {"class_type": "LoadImage", "inputs": {"image": "private.png"}}
    graph["2"]["inputs"]["image"] = ["4", 0]
    return graph


@pytest.mark.timeout(180)
async def test_a_stored_graph_naming_a_file_outside_courier_fails_before_it_is_queued(
        comfyui, botapi, botapi_bot, pg_database, tmp_path):
    picture = io.BytesIO()
    Image.new("RGB", (16, 16), (9, 9, 9)).save(picture, "PNG")
    (comfyui.base_directory / "input" / "private.png").write_bytes(picture.getvalue())
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)) as courier:
        await commands.put_command(courier.store.pool, "old", workflow=leaking_graph(), description="stored long ago")
        request = botapi_bot.inject_text(USER, "/old x")

        async def ended():
            rows = await job_rows(courier.store.pool)
            return rows if rows and rows[0]["status"] in ("succeeded", "failed") else None

        (job,) = await until(ended, TIMEOUT_S, "the job's end")
        reason = i18n.text("en", "file_input_refused", node_type="LoadImage", node_id="4", input_name="image")
        assert (job["status"], job["error"]) == ("failed", reason), job
        told = i18n.text("en", "failed", name="old", reason=reason)
        await botapi.wait_for(lambda: told in [shown_text(call) for call in botapi_bot.outbox], timeout=30)
    assert not [call for call in botapi_bot.outbox if call.method in ("sendDocument", "sendPhoto")
                and replies_to(request)(call)], "the picture was sent"
    async with aiohttp.ClientSession() as http, http.get(f"{comfyui.url}/history") as reply:
        history = await reply.json()
    assert not [item for item in history.values() if item["prompt"][2].get("4", {}).get("class_type") == "LoadImage"
                and item["prompt"][2]["4"]["inputs"].get("image") == "private.png"], "the prompt reached ComfyUI"
