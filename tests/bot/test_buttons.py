"""The buttons under each result and /history end to end: real python-telegram-bot on the Bot API emulator,
real PostgreSQL and a real ComfyUI (COMFYUI_DIR) running the weight-free commands. Every press is
answered; a stranger's press (as in a group, where everyone sees the buttons) gets an alert and does
nothing; two presses of a button that queues, processed at the same time, queue one job."""

import io

import numpy as np
import pytest
from PIL import Image

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.requires import require_comfyui

USER, STRANGER = 111, 222
JOB_TIMEOUT_S = 120
LABELS = ["button_seed", "button_upscale", "button_edit", "button_info", "button_delete"]


def en(key: str, **params) -> str:
    return i18n.text("en", key, **params)


@pytest.fixture
def comfyui_url(request):
    require_comfyui()
    return request.getfixturevalue("comfyui").url


def courier_on(botapi, botapi_bot, pg_database, url, data_dir, **env):
    return running_courier(botapi, botapi_bot, pg_database, url, data_dir,
                           COURIER_ALLOWED_USERS=f"{USER},{STRANGER}", COURIER_EDIT_COMMAND="demoedit", **env)


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, comfyui_url, tmp_path):
    async with courier_on(botapi, botapi_bot, pg_database, comfyui_url, tmp_path) as service:
        yield service


async def fetch(courier, sql: str, *args):
    async with courier.store.pool.acquire() as conn:
        return await conn.fetch(sql, *args)


async def done(bot, count: int) -> None:
    """Wait until ``count`` jobs have said they are done (in their status messages, once recorded)."""
    await bot.emulator.wait_for(lambda: sum(c.method == "editMessageText" and c.params["text"].startswith("Done in")
                                            for c in bot.outbox) >= count, timeout=JOB_TIMEOUT_S)


async def result_buttons(bot, index: int = 0) -> tuple[int, dict[str, str]]:
    """The message the ``index``-th result's buttons ride on (its photo), and their callback data by label key."""
    calls = await bot.emulator.wait_for(
        lambda: (found := [c for c in bot.outbox if c.method in ("sendPhoto", "editMessageReplyMarkup")
                           and c.params.get("reply_markup")])[index:] and found,
        timeout=JOB_TIMEOUT_S)
    call = calls[index]
    everything = [b for row in call.params["reply_markup"]["inline_keyboard"] for b in row]
    buttons = [b for b in everything if "callback_data" in b]
    assert [b["text"] for b in buttons] == [en(key) for key in LABELS]
    assert [b["text"] for b in everything if "switch_inline_query_chosen_chat" in b] == [en("button_share")]
    assert all(len(b["callback_data"].encode()) <= 64 for b in buttons)
    message_id = call.result["message_id"] if call.method == "sendPhoto" else call.params["message_id"]
    return message_id, {key: b["callback_data"] for key, b in zip(LABELS, buttons, strict=True)}


def press(bot, message_id: int, data: str, presser: int | None = None) -> dict:
    return bot.inject_callback_query(USER, message_id, data, presser=presser)


async def answer_to(bot, query: dict) -> dict:
    """The answerCallbackQuery call of the press ``query``."""
    call = await bot.wait_for_call("answerCallbackQuery", where=lambda c: c.params["callback_query_id"] == query["id"],
                                   timeout=30)
    return call.params


async def refused_to_stranger(bot, message_id: int, data: str) -> None:
    answer = await answer_to(bot, press(bot, message_id, data, presser=STRANGER))
    assert answer["text"] == en("button_not_yours") and answer["show_alert"] is True


async def double_press(bot, message_id: int, data: str) -> list[str]:
    """Two presses at once (the bot handles updates concurrently); the texts of both answers, sorted."""
    first, second = press(bot, message_id, data), press(bot, message_id, data)
    return sorted([(await answer_to(bot, first)).get("text", ""), (await answer_to(bot, second)).get("text", "")])


async def queues_once_for_its_user_only(bot, message_id: int, data: str) -> None:
    """A stranger's press is refused; two presses of the job's user at once queue one job."""
    await refused_to_stranger(bot, message_id, data)
    assert await double_press(bot, message_id, data) == sorted([en("button_queued"), en("button_pressed")])


def png_size(data: bytes) -> tuple[int, int]:
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    return image.size


def documents(bot) -> list[dict]:
    return [c.result["document"] for c in bot.outbox if c.method == "sendDocument"]


async def test_info_shows_the_command_line_that_makes_the_result_again(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/demo --ar 1:1 --seed 7 a <fox>")
    message_id, data = await result_buttons(botapi_bot)
    preview = await botapi_bot.wait_for_call("sendPhoto")
    assert message_id == preview.result["message_id"]  # under the last message of the result

    await refused_to_stranger(botapi_bot, message_id, data["button_info"])
    assert not [c for c in botapi_bot.outbox if c.method == "sendMessage" and "ℹ️" in c.params["text"]]
    answer = await answer_to(botapi_bot, press(botapi_bot, message_id, data["button_info"]))
    assert "text" not in answer
    info = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"].startswith("ℹ️"))
    assert info.params["parse_mode"] == "HTML"
    assert info.params["text"] == en("info", command="demo", seed=7, options="--ar 1:1",
                                     prompt="a &lt;fox&gt;", line="<code>/demo --seed 7 --ar 1:1 a &lt;fox&gt;</code>")
    again = await answer_to(botapi_bot, press(botapi_bot, message_id, data["button_info"]))
    assert again["text"] == en("info_shown")  # within 10 s of the first: the message is in the chat already
    await done(botapi_bot, 1)
    assert sum(c.method == "sendMessage" and c.params["text"] == info.params["text"] for c in botapi_bot.outbox) == 1
    assert len(await fetch(courier, "SELECT 1 FROM courier_jobs")) == 1  # it queues nothing


async def test_new_seed_queues_the_same_command_once_with_another_seed(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/demo --size 96x64 a lighthouse")
    message_id, data = await result_buttons(botapi_bot)
    await queues_once_for_its_user_only(botapi_bot, message_id, data["button_seed"])
    await result_buttons(botapi_bot, 1)  # the new result has buttons of its own
    await done(botapi_bot, 2)
    first, again = [row["params"] for row in await fetch(courier, "SELECT params FROM courier_jobs ORDER BY id")]
    assert (again["prompt"], again["options"], again["inputs"]) == ("a lighthouse", "--size 96x64", {"width": 96,
                                                                                                   "height": 64})
    assert again["seed"] != first["seed"]
    answer = await answer_to(botapi_bot, press(botapi_bot, message_id, data["button_seed"]))
    assert answer["text"] == en("button_pressed")
    assert len(await fetch(courier, "SELECT 1 FROM courier_jobs")) == 2


async def test_upscale_doubles_the_result_without_an_upscale_model(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/demo --size 96x64 a lighthouse")
    message_id, data = await result_buttons(botapi_bot)
    await queues_once_for_its_user_only(botapi_bot, message_id, data["button_upscale"])
    await done(botapi_bot, 2)
    small, big = (botapi_bot.file_bytes(d["file_id"]) for d in documents(botapi_bot))
    assert png_size(small) == (96, 64) and png_size(big) == (192, 128)
    [(image,)] = [tuple(r) for r in await fetch(
        courier, "SELECT params->>'image_file_id' FROM courier_jobs WHERE command = 'upscale'")]
    assert image == documents(botapi_bot)[0]["file_id"]  # the lossless file, not the preview

    out = io.BytesIO()
    Image.new("RGB", (50, 30), (10, 200, 30)).save(out, format="PNG")
    sent = botapi_bot.inject_document(USER, out.getvalue(), "mine.png", mime_type="image/png")
    botapi_bot.inject_text(USER, "/upscale", reply_to=sent["message_id"])  # the command on its own, too
    await done(botapi_bot, 3)
    assert png_size(botapi_bot.file_bytes(documents(botapi_bot)[-1]["file_id"])) == (100, 60)


async def test_edit_waits_for_the_instruction_across_a_restart(botapi, botapi_bot, pg_database, comfyui_url, tmp_path):
    async with courier_on(botapi, botapi_bot, pg_database, comfyui_url, tmp_path):
        botapi_bot.inject_text(USER, "/demo --size 64x64 invert me")
        message_id, data = await result_buttons(botapi_bot)
        await done(botapi_bot, 1)
        await refused_to_stranger(botapi_bot, message_id, data["button_edit"])
        assert "text" not in await answer_to(botapi_bot, press(botapi_bot, message_id, data["button_edit"]))
        ask = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"] == en("edit_ask",
                                                                                                  minutes=10))
        [[cancel]] = ask.params["reply_markup"]["inline_keyboard"]
        assert cancel["text"] == en("button_cancel_edit")
        answer = await answer_to(botapi_bot, press(botapi_bot, message_id, data["button_edit"]))
        assert answer["text"] == en("edit_waiting")  # one wait, one question
        assert sum(c.method == "sendMessage" and c.params["text"] == ask.params["text"] for c in botapi_bot.outbox) == 1

    async with courier_on(botapi, botapi_bot, pg_database, comfyui_url, tmp_path / "again") as courier:
        botapi_bot.inject_text(USER, "make it negative")
        await done(botapi_bot, 2)
        [params] = [row["params"] for row in await fetch(
            courier, "SELECT params FROM courier_jobs WHERE command = 'demoedit'")]
        original, edited = (botapi_bot.file_bytes(d["file_id"]) for d in documents(botapi_bot))
        assert params["prompt"] == "make it negative" and params["image_file_id"] == documents(botapi_bot)[0]["file_id"]
        pixels = [np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int) for data in (original, edited)]
        assert np.abs(pixels[1] - (255 - pixels[0])).max() <= 1
        assert await fetch(courier, "SELECT 1 FROM courier_pending_actions") == []

        hint = len(botapi_bot.outbox)
        botapi_bot.inject_text(USER, "and again")  # the wait is over: a plain text gets the hint
        await botapi_bot.emulator.wait_for(lambda: any(c.method == "sendMessage" and c.params["text"] == en("hint_text")
                                                       for c in botapi_bot.outbox[hint:]), timeout=10)


async def test_an_edit_can_be_cancelled_and_expires(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/demo --size 64x64 x")
    message_id, data = await result_buttons(botapi_bot)
    await done(botapi_bot, 1)
    press(botapi_bot, message_id, data["button_edit"])
    ask = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"] == en("edit_ask", minutes=10))
    botapi_bot.inject_text(USER, "/cancel")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"] == en("edit_cancelled"))
    [[cancel]] = ask.params["reply_markup"]["inline_keyboard"]
    answer = await answer_to(botapi_bot, press(botapi_bot, ask.result["message_id"], cancel["callback_data"]))
    assert answer["text"] == en("edit_stale")

    press(botapi_bot, message_id, data["button_edit"])  # a new wait, cancelled with its button
    ask = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"] == en("edit_ask", minutes=10)
                                         and c.result["message_id"] != ask.result["message_id"])
    [[cancel]] = ask.params["reply_markup"]["inline_keyboard"]
    await refused_to_stranger(botapi_bot, ask.result["message_id"], cancel["callback_data"])  # it still waits:
    pressed = press(botapi_bot, ask.result["message_id"], cancel["callback_data"])
    assert "text" not in await answer_to(botapi_bot, pressed)
    await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"] == en("edit_cancelled"))

    press(botapi_bot, message_id, data["button_edit"])  # and one that expires
    await botapi_bot.emulator.wait_for(lambda: sum(c.method == "sendMessage" and c.params["text"] == ask.params["text"]
                                                   for c in botapi_bot.outbox) == 3, timeout=10)
    async with courier.store.pool.acquire() as conn:
        assert await conn.execute("UPDATE courier_pending_actions SET expires_at = now() WHERE action = 'edit'") \
            == "UPDATE 1"
    before = len(botapi_bot.outbox)
    botapi_bot.inject_text(USER, "too late")
    await botapi_bot.emulator.wait_for(lambda: any(c.method == "sendMessage" and c.params["text"] == en("hint_text")
                                                   for c in botapi_bot.outbox[before:]), timeout=10)
    assert len(await fetch(courier, "SELECT 1 FROM courier_jobs")) == 1


async def test_delete_removes_the_result_s_files_records_and_messages(courier, botapi_bot, request):
    comfyui = request.getfixturevalue("comfyui")
    botapi_bot.inject_text(USER, "/demo --size 64x64 delete me")
    message_id, data = await result_buttons(botapi_bot)
    await done(botapi_bot, 1)
    [job] = await fetch(courier, "SELECT id, status_message_id, result FROM courier_jobs")
    [output] = job["result"]["outputs"]
    path = comfyui.base_directory / output["type"] / output["subfolder"] / output["filename"]
    messages = {job["status_message_id"], *output["message_ids"]}
    assert path.is_file() and len(messages) == 3 and messages <= {m["message_id"] for m in botapi_bot.history(USER)}

    await refused_to_stranger(botapi_bot, message_id, data["button_delete"])
    assert path.is_file() and len(await fetch(courier, "SELECT 1 FROM courier_jobs")) == 1
    assert await double_press(botapi_bot, message_id, data["button_delete"]) == sorted(
        [en("deleted"), en("button_gone")])
    assert not path.exists()
    assert await fetch(courier, "SELECT 1 FROM courier_jobs") == []
    assert await fetch(courier, "SELECT 1 FROM courier_result_buttons") == []
    [session] = await fetch(courier, "SELECT last_outputs FROM courier_chat_sessions WHERE user_id = $1", USER)
    assert session["last_outputs"] == []  # nothing left to chain on
    assert not messages & {m["message_id"] for m in botapi_bot.history(USER)}


async def test_history_lists_the_last_results_with_a_button_to_run_each_again(courier, botapi_bot):
    for text in ("/demo --seed 5 first", "/demo --seed 6 --size 64x64 second"):
        botapi_bot.inject_text(USER, text)
        await result_buttons(botapi_bot, 0 if "first" in text else 1)
    await done(botapi_bot, 2)
    botapi_bot.inject_text(STRANGER, "/history")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"] == en("history_none"))

    botapi_bot.inject_text(USER, "/history")
    listing = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"].startswith(
        en("history_title")))
    [row] = listing.params["reply_markup"]["inline_keyboard"]
    assert [b["text"] for b in row] == [en("button_again", number=1), en("button_again", number=2)]
    lines = listing.params["text"].splitlines()[1:]
    assert [line.split(" (")[0] for line in lines] == [
        "1. <code>/demo --seed 6 --size 64x64 second</code>", "2. <code>/demo --seed 5 first</code>"]
    message_id, again = listing.result["message_id"], row[1]["callback_data"]

    await queues_once_for_its_user_only(botapi_bot, message_id, again)
    await done(botapi_bot, 3)
    rows = await fetch(courier, "SELECT params FROM courier_jobs ORDER BY id")
    assert len(rows) == 3
    assert {k: rows[2]["params"][k] for k in ("prompt", "seed", "options")} == \
        {k: rows[0]["params"][k] for k in ("prompt", "seed", "options")}
    first, rerun = (botapi_bot.file_bytes(d["file_id"]) for d in (documents(botapi_bot)[0], documents(botapi_bot)[2]))
    assert first == rerun  # the same seed: the same picture


def tiny_upscale_model(path) -> None:
    """A real ×2 ESRGAN, untrained and tiny (8 filters, 1 block): what matters is that the model runs."""
    import torch
    from spandrel.architectures.ESRGAN import ESRGAN

    torch.manual_seed(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ESRGAN(num_filters=8, num_blocks=1, scale=2).state_dict(), path)


async def test_upscale_uses_an_upscale_model_where_the_backend_has_one(botapi, botapi_bot, pg_database, tmp_path,
                                                                     request):
    require_comfyui()
    server = request.getfixturevalue("comfyui_factory")(start=False)
    tiny_upscale_model(server.base_directory / "models" / "upscale_models" / "tiny-RealESRGAN_x2.pth")
    server.start()
    async with courier_on(botapi, botapi_bot, pg_database, server.url, tmp_path) as courier:
        botapi_bot.inject_text(USER, "/demo --size 96x64 a lighthouse")
        await done(botapi_bot, 1)
        botapi_bot.inject_text(USER, "/upscale")  # chains on the last result
        await done(botapi_bot, 2)
        assert png_size(botapi_bot.file_bytes(documents(botapi_bot)[-1]["file_id"])) == (192, 128)
        [result] = [row["result"] for row in await fetch(
            courier, "SELECT result FROM courier_jobs WHERE command = 'upscale'")]
        [entry] = server.get_json(f"/history/{result['prompt_id']}").values()
        ran = {node["class_type"]: node["inputs"] for node in entry["prompt"][2].values()}
        assert ran["UpscaleModelLoader"] == {"model_name": "tiny-RealESRGAN_x2.pth"}
        assert ran["ImageScaleBy"]["scale_by"] == 1.0 and "ImageSharpen" not in ran
