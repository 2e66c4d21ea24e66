"""/forget end to end: python-telegram-bot ⇄ Bot API emulator, real PostgreSQL, and a real ComfyUI whose
output and input folders hold the user's files (the fake ComfyUI where a backend that cannot delete is the
point). The confirmation is a button looked up in PostgreSQL: it outlives a restart, and a stranger's
press does nothing."""

import io
import json
import urllib.request

from PIL import Image

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.requires import require_comfyui

USER = 111
STRANGER = 222
JOB_TIMEOUT_S = 120


def en(key: str, **params) -> str:
    return i18n.text("en", key, **params)


def courier_on(botapi, botapi_bot, pg_database, backend_url, data_dir):
    return running_courier(botapi, botapi_bot, pg_database, backend_url, data_dir,
                           COURIER_ALLOWED_USERS=f"{USER},{STRANGER}", COURIER_QUOTA_DAY="50")


async def fetch(courier, sql: str, *args):
    async with courier.store.pool.acquire() as conn:
        return await conn.fetch(sql, *args)


async def finished(botapi_bot, count: int) -> None:
    """Wait until ``count`` jobs have said they are done."""
    await botapi_bot.emulator.wait_for(lambda: len([c for c in botapi_bot.outbox if c.method == "editMessageText"
                                                    and c.params["text"].startswith("Done in")]) >= count,
                                       timeout=JOB_TIMEOUT_S)


async def ask_to_forget(botapi_bot) -> tuple[int, str]:
    """/forget; returns the confirmation's message id and its button's callback data (checked)."""
    botapi_bot.inject_text(USER, "/forget")
    confirmation = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"] == en(
        "forget_confirm", hours=24))
    [[button]] = confirmation.params["reply_markup"]["inline_keyboard"]
    assert button["text"] == en("forget_button") and button["callback_data"].startswith("forget:")
    return confirmation.result["message_id"], button["callback_data"]


async def press(botapi_bot, message_id: int, data: str, presser: int | None = None) -> str | None:
    """Press the button; returns the text of the answer to that press (None: a silent answer)."""
    query = botapi_bot.inject_callback_query(USER, message_id, data, presser=presser)
    answer = await botapi_bot.wait_for_call("answerCallbackQuery",
                                            where=lambda c: c.params["callback_query_id"] == query["id"])
    return answer.params.get("text")


def picture() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


async def test_forget_after_a_restart_leaves_no_row_file_or_message_of_the_user(
        botapi, botapi_bot, pg_database, tmp_path, request):
    require_comfyui()
    comfyui = request.getfixturevalue("comfyui")
    async with courier_on(botapi, botapi_bot, pg_database, comfyui.url, tmp_path) as courier:
        botapi_bot.inject_text(USER, "/demo forget me")
        await finished(botapi_bot, 1)
        botapi_bot.inject_photo(USER, picture(), caption="/demoedit")
        await finished(botapi_bot, 2)
        botapi_bot.inject_text(STRANGER, "/demo keep me")  # someone else's job stays
        await finished(botapi_bot, 3)
        jobs = await fetch(courier, "SELECT id, user_id, status_message_id, result FROM courier_jobs ORDER BY id")
        mine = [job for job in jobs if job["user_id"] == USER]
        files = [comfyui.base_directory / o["type"] / o["subfolder"] / o["filename"]
                 for job in mine for o in job["result"]["outputs"]]
        files.append(comfyui.base_directory / "input" / "courier" / f"job-{mine[1]['id']}.png")
        theirs = [comfyui.base_directory / o["type"] / o["subfolder"] / o["filename"]
                  for job in jobs if job["user_id"] == STRANGER for o in job["result"]["outputs"]]
        assert len(files) == 3 and all(path.is_file() for path in files + theirs), files + theirs
        bot_messages = {job["status_message_id"] for job in mine} | {
            m for job in mine for o in job["result"]["outputs"] for m in o["message_ids"]}
        assert len(bot_messages) == 2 + 2 * 2  # a status and a file + a preview per job
        prompt_ids = [job["result"]["prompt_id"] for job in mine]
        assert all(comfyui.get_json(f"/history/{p}") for p in prompt_ids)
        message_id, data = await ask_to_forget(botapi_bot)

    async with courier_on(botapi, botapi_bot, pg_database, comfyui.url, tmp_path / "again") as courier:
        assert await press(botapi_bot, message_id, data, presser=STRANGER) == en("forget_stale")
        assert len(await fetch(courier, "SELECT 1 FROM courier_jobs WHERE user_id = $1", USER)) == 2

        assert await press(botapi_bot, message_id, data) is None
        report = await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["message_id"] == message_id)
        assert report.params["text"] == "\n".join([en("forget_done", jobs=2, files=3, messages=6), en("forget_kept")])
        for table in ("courier_jobs", "courier_chat_sessions", "courier_pending_actions"):
            assert await fetch(courier, f"SELECT * FROM {table} WHERE user_id = $1", USER) == [], table
        [row] = await fetch(courier, "SELECT * FROM courier_users WHERE user_id = $1", USER)
        assert (row["username"], row["first_name"], row["language_code"], row["language"]) == (None,) * 4
        assert len(await fetch(courier, "SELECT 1 FROM courier_quota_events WHERE user_id = $1", USER)) == 2
        assert not [path for path in files if path.exists()]
        assert all(path.is_file() for path in theirs)
        assert not any(comfyui.get_json(f"/history/{p}") for p in prompt_ids)
        left = {m["message_id"] for m in botapi_bot.history(USER)}
        assert not bot_messages & left
        assert len(await fetch(courier, "SELECT 1 FROM courier_jobs WHERE user_id = $1", STRANGER)) == 1
        assert "reply_markup" not in report.params  # the button is gone, and its token too (above)


async def test_forget_says_what_a_backend_could_not_delete(botapi, botapi_bot, pg_database, tmp_path):
    async with FakeComfyUI(steps=0) as fake, \
            courier_on(botapi, botapi_bot, pg_database, fake.url, tmp_path) as courier:  # fake: no Courier route
        botapi_bot.inject_text(USER, "/demo one")
        await finished(botapi_bot, 1)
        message_id, data = await ask_to_forget(botapi_bot)
        await press(botapi_bot, message_id, data)
        report = await botapi_bot.wait_for_call("editMessageText",
                                                where=lambda c: c.params["message_id"] == message_id)
        assert report.params["text"] == "\n".join([
            en("forget_done", jobs=1, files=0, messages=3), en("forget_not_deleted", files=1, messages=0),
            en("forget_kept")])
        assert await fetch(courier, "SELECT 1 FROM courier_jobs") == []


async def test_the_backend_route_deletes_only_courier_files(request):
    require_comfyui()
    comfyui = request.getfixturevalue("comfyui")
    output = comfyui.base_directory / "output"
    (output / "courier").mkdir(parents=True, exist_ok=True)
    (output / "courier" / "mine.png").write_bytes(b"x")
    (output / "other.png").write_bytes(b"y")
    body = {"files": [{"filename": "mine.png", "subfolder": "courier", "type": "output"},
                      {"filename": "gone.png", "subfolder": "courier", "type": "output"},
                      {"filename": "other.png", "subfolder": "", "type": "output"},
                      {"filename": "../other.png", "subfolder": "courier", "type": "output"},
                      {"filename": "mine.png", "subfolder": "courier", "type": "models"}], "prompt_ids": ["nope"]}
    call = urllib.request.Request(comfyui.url + "/courier/files/delete", data=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(call, timeout=10) as reply:
        counts = json.loads(reply.read())
    assert counts == {"deleted": 1, "missing": 1, "refused": 3, "failed": 0}
    assert not (output / "courier" / "mine.png").exists() and (output / "other.png").is_file()
