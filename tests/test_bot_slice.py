"""The spine end to end: real python-telegram-bot ⇄ Bot API emulator, real PostgreSQL,
the dispatcher and a ComfyUI backend (the transcript-faithful fake; a real ComfyUI too
when COMFYUI_DIR is set)."""

import io

import numpy as np
import pytest
from PIL import Image

from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import until
from comfyui_courier.tests.support.requires import require_comfyui

USER = 111
STRANGER = 999


@pytest.fixture(params=["fake", "real"])
async def backend_url(request):
    if request.param == "fake":
        async with FakeComfyUI() as fake:
            yield fake.url
    else:
        require_comfyui()
        yield request.getfixturevalue("comfyui").url


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, backend_url, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, backend_url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER}") as service:
        yield service


@pytest.fixture
async def courier_on_fake(botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    """For the bot's own behaviour: one backend is enough, the controllable fake."""
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER}") as service:
        yield service


def png(data: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    return np.asarray(image.convert("RGB")).astype(int)


def replies_to(message_id):
    return lambda call: call.params.get("reply_to_message_id") in (message_id, str(message_id)) or (
        call.result.get("reply_to_message", {}).get("message_id") == message_id)


async def result_document(bot, request_message):
    try:
        call = await bot.wait_for_call("sendDocument", where=replies_to(request_message["message_id"]), timeout=60)
    except TimeoutError:
        raise AssertionError(f"no result; the bot sent: {[(c.method, c.params.get('text')) for c in bot.outbox]}"
                             ) from None
    return call.result


async def test_demo_renders_and_chains_edits(courier, botapi_bot):
    request = botapi_bot.inject_text(USER, "/demo hello")
    status = await botapi_bot.wait_for_call("sendMessage", where=lambda c: "Queued /demo" in c.params["text"]
                                            or c.params["text"].startswith("Rendering"),  # the dispatcher came first
                                            timeout=30)  # a status waits behind results for the chat's limit
    assert "Rendering" in status.params["text"] or "position 1" in status.params["text"]
    first = await result_document(botapi_bot, request)
    original = png(botapi_bot.file_bytes(first["document"]["file_id"]))
    assert original.shape == (512, 512, 3)
    await botapi_bot.wait_for_call("sendPhoto", where=replies_to(first["message_id"]))
    await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].startswith("Done"))

    # /demoedit without a reply edits the last result (command chaining)
    chained = botapi_bot.inject_text(USER, "/demoedit invert")
    inverted = png(botapi_bot.file_bytes((await result_document(botapi_bot, chained))["document"]["file_id"]))
    assert np.abs(inverted - (255 - original)).max() <= 1

    # ... and replying to a picture edits that picture
    replied = botapi_bot.inject_text(USER, "/demoedit again", reply_to=first["message_id"])
    again = png(botapi_bot.file_bytes((await result_document(botapi_bot, replied))["document"]["file_id"]))
    assert np.abs(again - (255 - original)).max() <= 1

    def said_done(call) -> bool:  # the status's last edit, or the photo's caption where no status was posted
        return str(call.params.get("text") or call.params.get("caption") or "").startswith("Done")

    await botapi_bot.emulator.wait_for(lambda: sum(map(said_done, botapi_bot.outbox)) >= 3, timeout=30)

    async def jobs() -> list[tuple]:
        async with courier.store.pool.acquire() as conn:
            return [tuple(r) for r in await conn.fetch("SELECT command, status FROM courier_jobs ORDER BY id")]

    async def all_succeeded() -> bool:  # a job's row is marked once its "Done" went
        return all(status == "succeeded" for _, status in await jobs())

    await until(all_succeeded, 30, "the three jobs marked succeeded")
    assert await jobs() == [("demo", "succeeded"), ("demoedit", "succeeded"), ("demoedit", "succeeded")]


async def test_model_command_without_weights_fails_clearly_and_bot_keeps_serving(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/f an astronaut")
    failed = await botapi_bot.wait_for_call(
        "editMessageText", where=lambda c: c.params["text"].startswith("/f failed"), timeout=60)
    text = failed.params["text"]
    for name in ("flux1-schnell.safetensors", "clip_l.safetensors", "t5xxl_fp16.safetensors", "ae.safetensors"):
        assert name in text
    assert "diffusion_models" in text
    async with courier.store.pool.acquire() as conn:
        status, error = await conn.fetchrow("SELECT status, error FROM courier_jobs WHERE command = 'f'")
    assert status == "failed" and "flux1-schnell.safetensors" in error

    request = botapi_bot.inject_text(USER, "/demo still here")
    assert (await result_document(botapi_bot, request))["document"]["file_name"].endswith(".png")


async def test_strangers_are_refused_and_nothing_is_queued(courier, botapi_bot):
    botapi_bot.inject_text(STRANGER, "/demo let me in")
    refusal = await botapi_bot.wait_for_call("sendMessage", where=lambda c: str(STRANGER) in c.params["text"])
    assert "private" in refusal.params["text"]
    async with courier.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM courier_jobs") == 0


async def test_help_lists_the_command_table_and_unknown_commands_are_explained(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/help")
    help_call = await botapi_bot.wait_for_call("sendMessage", where=lambda c: "Commands" in c.params["text"])
    help_text = help_call.params["text"]
    for name in ("/f", "/qwen", "/demo", "/demoedit"):
        assert name in help_text
    botapi_bot.inject_text(USER, "/nosuch thing")
    await botapi_bot.wait_for_call("sendMessage",
                                   where=lambda c: "/nosuch" in c.params["text"] and "/help" in c.params["text"])
    botapi_bot.inject_text(USER, "/demo")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: "add a description" in c.params["text"])


def sent_texts(bot):
    return [c.params.get("text") for c in bot.outbox if c.method in ("sendMessage", "editMessageText")]


def picture(color=(200, 40, 40), size=(64, 48), fmt="PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=fmt)
    return out.getvalue()


async def test_photo_with_command_caption_is_edited(courier_on_fake, botapi_bot):
    request = botapi_bot.inject_photo(USER, picture(), caption="/demoedit invert this")
    result = png(botapi_bot.file_bytes((await result_document(botapi_bot, request))["document"]["file_id"]))
    original = np.asarray(Image.open(io.BytesIO(picture())))
    assert result.shape[2] == 3 and abs(result.mean() - (255 - original.mean())) < 3


async def test_edit_without_any_picture_explains_what_to_do(courier_on_fake, botapi_bot):
    botapi_bot.inject_text(USER, "/demoedit make it pop")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: "reply to one" in c.params["text"])
    async with courier_on_fake.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM courier_jobs") == 0


async def test_corrupt_image_fails_the_job_with_a_clear_reason(courier_on_fake, botapi_bot):
    botapi_bot.inject_document(USER, b"\x89PNG\r\n\x1a\n not really", "broken.png", mime_type="image/png",
                               caption="/demoedit")
    failed = await botapi_bot.wait_for_call("editMessageText", where=lambda c: "failed" in c.params["text"], timeout=30)
    assert "couldn't use that picture" in failed.params["text"]
    request = botapi_bot.inject_text(USER, "/demo still fine")
    await result_document(botapi_bot, request)


async def test_flood_is_capped_status_lists_and_cancel_clears(courier_on_fake, botapi_bot, fake_comfy):
    fake_comfy.pause()  # nothing finishes while we flood
    limit = courier_on_fake.settings.max_jobs_per_user
    for index in range(limit + 2):
        botapi_bot.inject_text(USER, f"/demo flood {index}")
    try:
        await botapi_bot.wait_for_call("sendMessage", where=lambda c: "already have" in c.params["text"])
    except TimeoutError:
        raise AssertionError(sent_texts(botapi_bot)) from None
    def shown() -> list[str]:
        """The bot's texts in the chat: one status for the running job, one queue message for the rest."""
        return [m["text"] for m in botapi_bot.history(USER) if m.get("text", "").startswith(("Queued", "Rendering"))]

    def counted() -> bool:  # a status per job on the backend (a pipeline of two), one queue message for the rest
        texts = shown()
        return (sum(t.startswith("Queued /demo") for t in texts) == 1
                and sum(t.count("Queued /demo") + t.startswith("Rendering /demo") for t in texts) == limit)

    try:  # the queue message coalesces the commands: one, edited
        await botapi_bot.emulator.wait_for(counted, timeout=30)
    except TimeoutError:
        raise AssertionError(shown()) from None
    async with courier_on_fake.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM courier_jobs") == limit

    botapi_bot.inject_text(USER, "/status")
    status = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"].startswith("#"))
    assert status.params["text"].count("/demo") == limit and "running" in status.params["text"]

    botapi_bot.inject_text(USER, "/cancel")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"] == f"Cancelled {limit} jobs.")
    fake_comfy.resume()
    async with courier_on_fake.store.pool.acquire() as conn:
        statuses = await conn.fetch("SELECT status FROM courier_jobs")
    assert {r["status"] for r in statuses} == {"cancelled"}
    botapi_bot.inject_text(USER, "/cancel")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: "no jobs to cancel" in c.params["text"])


async def test_replies_follow_the_users_language(courier_on_fake, botapi_bot):
    botapi_bot.emulator.add_user(USER, "Anna", language_code="de")
    botapi_bot.inject_text(USER, "/demo hallo")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: "eingereiht" in c.params["text"]
                                   or "wird berechnet" in c.params["text"])  # queued, or started first
    await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].startswith("Fertig"), timeout=30)


async def test_a_job_runs_while_its_status_hangs_and_the_chat_shows_one_done(courier_on_fake, botapi_bot):
    """The job's status message stuck (its post never answered), the job still runs, and the chat
    says "Done" once: in its picture's caption, no second status posted."""
    botapi_bot.hang("sendMessage")  # no answer, ever
    request = botapi_bot.inject_text(USER, "/demo while the reply hangs")
    await result_document(botapi_bot, request)
    await botapi_bot.emulator.wait_for(  # the hang happened
        lambda: any(c.method == "sendMessage" and c.status is None for c in botapi_bot.calls), timeout=30)
    photo = await botapi_bot.wait_for_call("sendPhoto", timeout=30)
    assert photo.params["caption"].startswith("Done")
    assert not [m for m in botapi_bot.history(USER) if "text" in m
                and m.get("reply_to_message", {}).get("message_id") == request["message_id"]]
