"""Albums, videos and files beyond the upload limit, with real parts: python-telegram-bot on the Bot
API emulator, real PostgreSQL, real ComfyUI (weight-free graphs of core nodes).

- ``--n N`` on a graph that takes the batch: one album of the lossless files, one of their photos,
  and a line under them for the job's buttons (Telegram shows none under an album); a record per
  output, so a re-run of the job sends nothing twice.
- A video: streamable (sendVideo, supports_streaming), and its file as a document.
- A file beyond ``COURIER_UPLOAD_LIMIT_MB``, or one the Bot API server refuses with 413: a message
  with its size instead, nothing silently dropped.
"""

from __future__ import annotations

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.store import commands
from comfyui_courier.tests.jobs.test_delivery_faults import ended, sent
from comfyui_courier.tests.jobs.test_dispatcher import eventually, job_rows
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.requires import require_module

USER = 431
JOB_S = 120.0
pytestmark = pytest.mark.timeout(300)


def batch_graph() -> dict:
    """Telegram Input's card, repeated ``--n`` times (its batch output) -> Telegram Output."""
    return {
        "1": {"class_type": "CourierTelegramInput", "inputs": {
            "command": "album", "prompt": "", "seed": 0, "width": 96, "height": 64, "image": "",
            "chat_id": "", "user_id": "", "options": "n=4"}},
        "2": {"class_type": "RepeatImageBatch", "inputs": {"image": ["1", 1], "amount": ["1", 10]}},
        "3": {"class_type": "CourierTelegramOutput",
              "inputs": {"images": ["2", 0], "filename_prefix": "courier/album"}},
    }


def video_graph() -> dict:
    """Eight frames of the card -> CreateVideo -> Telegram Output: a small MP4, no weights."""
    return {
        "1": {"class_type": "CourierTelegramInput", "inputs": {
            "command": "clip", "prompt": "", "seed": 0, "width": 96, "height": 64, "image": "",
            "chat_id": "", "user_id": "", "options": ""}},
        "2": {"class_type": "RepeatImageBatch", "inputs": {"image": ["1", 1], "amount": 8}},
        "3": {"class_type": "CreateVideo", "inputs": {"images": ["2", 0], "fps": 8.0}},
        "4": {"class_type": "CourierTelegramOutput", "inputs": {"video": ["3", 0], "filename_prefix": "courier/clip"}},
    }


@pytest.fixture
async def start(comfyui, botapi, botapi_bot, pg_database, tmp_path):
    """``async with start(**env) as courier``: a Courier on the real ComfyUI with /album and /clip."""
    import contextlib

    @contextlib.asynccontextmanager
    async def start(**env):
        async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path,
                                   COURIER_ALLOWED_USERS=str(USER), **env) as service:
            await commands.put_command(service.store.pool, "album", workflow=batch_graph(), description="cards")
            await commands.put_command(service.store.pool, "clip", workflow=video_graph(), description="a clip")
            yield service
    return start


async def job_done(courier) -> list[dict]:
    """The outputs of the one job, once it succeeded."""
    (row,) = await eventually(lambda: ended(courier, USER), "the job ended", JOB_S)
    async with courier.store.pool.acquire() as conn:
        job = await conn.fetchrow("SELECT status, result FROM courier_jobs WHERE id = $1", row["id"])
    assert job["status"] == "succeeded", job
    return job["result"]["outputs"]


async def test_n_results_go_as_one_album_of_files_and_one_of_photos(start, botapi_bot, comfyui):
    async with start() as courier:
        request = botapi_bot.inject_text(USER, "/album --n 3 cards")
        outputs = await job_done(courier)
        documents, photos = sent(botapi_bot, "sendMediaGroup", USER)
        assert not sent(botapi_bot, "sendDocument", USER) and not sent(botapi_bot, "sendPhoto", USER)
        assert [item["type"] for item in documents.params["media"]] == ["document"] * 3
        assert [item["type"] for item in photos.params["media"]] == ["photo"] * 3
        assert documents.result[0]["reply_to_message"]["message_id"] == request["message_id"]
        assert photos.result[0]["reply_to_message"]["message_id"] == documents.result[0]["message_id"]
        assert len({m["media_group_id"] for m in documents.result + photos.result}) == 2
        on_disk = [(comfyui.base_directory / "output" / "courier" / o["filename"]).read_bytes() for o in outputs]
        assert [botapi_bot.file_bytes(m["document"]["file_id"]) for m in documents.result] == on_disk  # lossless
        (line,) = [c for c in sent(botapi_bot, "sendMessage", USER) if c.params["text"] == "⬆️ 3 results"]
        assert line.result["reply_to_message"]["message_id"] == documents.result[0]["message_id"]
        assert [o["message_ids"] for o in outputs] == [
            [d["message_id"], p["message_id"]] for d, p in zip(documents.result, photos.result, strict=True)
        ][:2] + [[documents.result[2]["message_id"], photos.result[2]["message_id"], line.result["message_id"]]]
        assert line.params["reply_markup"]["inline_keyboard"]  # an album can carry none: the line does
        assert not sent(botapi_bot, "editMessageReplyMarkup", USER)

        [row] = await job_rows(courier)  # run again, as after a crash between the send and "done"
        async with courier.store.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM courier_deliveries WHERE job_id = $1 "
                                       "AND status = 'sent'", row["id"]) == 3
            await conn.execute("UPDATE courier_jobs SET status = 'queued', finished_at = NULL, worker = NULL, "
                               "result = NULL WHERE id = $1", row["id"])
            await conn.execute("NOTIFY courier_jobs, 'requeued'")
        assert await job_done(courier) == outputs
    assert len(sent(botapi_bot, "sendMediaGroup", USER)) == 2  # nothing sent twice
    assert [c.params["text"] for c in sent(botapi_bot, "sendMessage", USER)].count("⬆️ 3 results") == 1


async def test_a_video_stays_streamable_and_comes_with_its_file(start, botapi_bot, comfyui):
    require_module("av", "PyAV, ComfyUI's video library: install ComfyUI's requirements")
    async with start() as courier:
        botapi_bot.inject_text(USER, "/clip a fox")
        (output,) = await job_done(courier)
    (video,), (document,) = sent(botapi_bot, "sendVideo", USER), sent(botapi_bot, "sendDocument", USER)
    on_disk = (comfyui.base_directory / "output" / "courier" / output["filename"]).read_bytes()
    assert output["filename"].endswith(".mp4") and output["kind"] == "video"
    assert video.params["supports_streaming"] is True
    assert (video.result["video"]["width"], video.result["video"]["height"]) == (96, 64)
    assert document.result["reply_to_message"]["message_id"] == video.result["message_id"]
    assert botapi_bot.file_bytes(document.result["document"]["file_id"]) == on_disk
    assert output["message_ids"] == [video.result["message_id"], document.result["message_id"]]


async def test_a_file_beyond_the_upload_limit_is_announced_with_its_size(start, botapi_bot):
    async with start(COURIER_UPLOAD_LIMIT_MB="0.002") as courier:  # 2 kB: any card is bigger
        request = botapi_bot.inject_text(USER, "/demo a fox")
        (output,) = await job_done(courier)
    assert not sent(botapi_bot, "sendDocument", USER) and not sent(botapi_bot, "sendPhoto", USER)
    (notice,) = [c for c in sent(botapi_bot, "sendMessage", USER) if output["filename"] in c.params["text"]]
    size = (notice.params["text"].split(" MB")[0]).split()[-1]
    assert notice.params["text"] == i18n.text("en", "result_too_large", filename=output["filename"],
                                              size_mb=float(size), limit_mb=0.002)
    assert notice.result["reply_to_message"]["message_id"] == request["message_id"]
    assert output["kind"] == "too_large" and output["message_ids"] == [notice.result["message_id"]]


async def test_files_the_server_refuses_with_413_are_announced_one_by_one(start, botapi, botapi_bot):
    """The setting says more than the Bot API server takes: its 413 is not retried, each file is told."""
    botapi.max_upload = 300  # bytes: less than any card
    async with start() as courier:
        botapi_bot.inject_text(USER, "/album --n 2 cards")
        outputs = await job_done(courier)
    refused = [c for c in botapi_bot.calls if c.status == 413]
    assert [c.method for c in refused] == ["sendMediaGroup", "sendDocument", "sendDocument"]  # no retries
    notices = [c.params["text"] for c in sent(botapi_bot, "sendMessage", USER)
               if "MB" in c.params["text"] and "cards" not in c.params["text"]]
    assert [o["kind"] for o in outputs] == ["too_large"] * 2
    assert [o["filename"] in text for o, text in zip(outputs, notices, strict=True)] == [True, True]
    assert all(text.endswith(i18n.text("en", "result_refused_for_size", filename="x", size_mb=1).split(": ", 1)[1])
               for text in notices)
