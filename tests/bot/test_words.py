"""Words that say what happened (issue 21, item 4): statuses after /cancel, plural counts, "Done in"
from the command's arrival, a refused file named, /help complete, long echoes cut, one hint per
album, every button press answered, ℹ️ throttled, ``--key=value`` and a bare ``--``.

End to end: real python-telegram-bot ⇄ Bot API emulator, real PostgreSQL, the dispatcher and the
controllable fake ComfyUI.
"""

import asyncio
import contextlib
import re
import time

import pytest
from telegram.constants import MessageLimit

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import running_courier

USER, ADMIN = 111, 999
INCIDENT = "went wrong on our side"


@pytest.fixture
async def start(botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    """``await start(**env)``: a running Courier (allowlist: USER and ADMIN, an admin)."""
    async with contextlib.AsyncExitStack() as stack:
        async def start(**env):
            env = {"COURIER_ALLOWED_USERS": f"{USER}", "COURIER_ADMIN_USERS": f"{ADMIN}", **env}
            return await stack.enter_async_context(
                running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path, **env))
        yield start
        fake_comfy.resume()


@pytest.fixture
async def courier(start):
    return await start()


def said(bot, chat_id=USER) -> list[str]:
    return [c.params.get("text") or "" for c in bot.outbox
            if c.method in ("sendMessage", "editMessageText") and c.params.get("chat_id") == chat_id]


async def reply_with(bot, needle: str, chat_id=USER, timeout: float = 10) -> str:
    try:
        call = await bot.wait_for_call("sendMessage", where=lambda c: c.params.get("chat_id") == chat_id
                                       and needle in (c.params.get("text") or ""), timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"no reply with {needle!r}; the bot said {said(bot, chat_id)}") from None
    return call.params["text"]


async def status_with(bot, needle: str, count: int = 1, timeout: float = 30) -> list[str]:
    """The texts of the first ``count`` status edits with ``needle``, waiting for them."""
    def found():
        edits = [c.params["text"] for c in bot.outbox if c.method == "editMessageText" and needle in c.params["text"]]
        return edits if len(edits) >= count else None
    try:
        return await bot.emulator.wait_for(found, timeout)
    except TimeoutError:
        raise AssertionError(f"no {count} status(es) with {needle!r}; the bot said {said(bot)}") from None


def bot_messages(bot, chat_id=USER) -> list[str]:
    """The texts of the bot's messages in the chat as the user sees them now (edits applied)."""
    return [m.get("text") or "" for m in bot.history(chat_id) if m.get("from", {}).get("id") == bot.id]


async def job_statuses(courier) -> list[str]:
    async with courier.store.pool.acquire() as conn:
        return [row["status"] for row in await conn.fetch("SELECT status FROM courier_jobs ORDER BY id")]


async def until(predicate, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {timeout} s")
        await asyncio.sleep(0.05)


async def running_and_queued(courier, fake_comfy, botapi_bot, count: int) -> None:
    """``count`` /demo jobs of USER: the first running (held in the paused ComfyUI) with its status
    message, the rest queued, listed in the chat's one queue message."""
    fake_comfy.pause()
    for number in range(count):
        botapi_bot.inject_text(USER, f"/demo job {number}")
    expected = [("running", True)] + [("queued", False)] * (count - 1)
    await until(lambda: _jobs_are(courier, expected), "one running with its status, the rest queued", timeout=60)
    if count > 1:
        await botapi_bot.emulator.wait_for(
            lambda: any(t.count("/demo") == count - 1 for t in bot_messages(botapi_bot)), timeout=60)


async def _jobs_are(courier, expected: list[tuple[str, bool]]) -> bool:
    async with courier.store.pool.acquire() as conn:
        rows = await conn.fetch("SELECT status, status_message_id IS NOT NULL AS shown FROM courier_jobs ORDER BY id")
    return [tuple(row) for row in rows] == expected


async def test_cancel_says_cancelled_in_the_status_of_running_and_queued_jobs(start, botapi_bot, fake_comfy):
    courier = await start(COURIER_PIPELINE_DEPTH="1")  # one prompt on the backend: the others wait with us
    await running_and_queued(courier, fake_comfy, botapi_bot, 3)
    botapi_bot.inject_text(USER, "/cancel")
    assert await reply_with(botapi_bot, "Cancelled") == "Cancelled 3 jobs."
    await botapi_bot.emulator.wait_for(  # the running job's status, and the queue message of the other two
        lambda: sum(t == "/demo was cancelled." for t in bot_messages(botapi_bot)) == 2, timeout=20)
    shown = bot_messages(botapi_bot)
    assert not [t for t in shown if "Queued" in t or "failed" in t or "Rendering" in t], shown
    assert await job_statuses(courier) == ["cancelled"] * 3


async def test_cancel_of_one_queued_job_edits_its_queue_message(start, botapi_bot, fake_comfy):
    courier = await start(COURIER_PIPELINE_DEPTH="1")
    await running_and_queued(courier, fake_comfy, botapi_bot, 2)
    async with courier.store.pool.acquire() as conn:
        queued = await conn.fetchval("SELECT id FROM courier_jobs WHERE status = 'queued'")
    botapi_bot.inject_text(USER, f"/cancel {queued}")
    await reply_with(botapi_bot, f"#{queued}")
    await botapi_bot.emulator.wait_for(lambda: "/demo was cancelled." in bot_messages(botapi_bot), timeout=20)
    assert not [t for t in bot_messages(botapi_bot) if "position" in t]


@pytest.mark.parametrize(("language", "count", "reply"), [
    ("en", 1, "Cancelled 1 job."),
    ("de", 4, "4 Aufträge abgebrochen."),
    ("de", 1, "1 Auftrag abgebrochen."),
    ("ru", 3, "Отменены 3 задачи."),
    ("ru", 5, "Отменено 5 задач."),
    ("tr", 2, "2 iş iptal edildi."),
])
async def test_cancel_counts_with_the_language_s_plural_forms(start, botapi_bot, fake_comfy, language, count, reply):
    courier = await start(COURIER_PIPELINE_DEPTH="1", COURIER_MAX_JOBS_PER_USER="10")
    botapi_bot.emulator.add_user(USER, "Ann", language_code=language)
    await running_and_queued(courier, fake_comfy, botapi_bot, count)
    botapi_bot.inject_text(USER, "/cancel")
    try:
        await botapi_bot.emulator.wait_for(lambda: reply in said(botapi_bot), timeout=30)
    except TimeoutError:
        raise AssertionError(f"no {reply!r}; the bot said {said(botapi_bot)}") from None
    assert i18n.ntext(language, "cancelled", count) == reply


async def test_done_counts_from_the_command_s_arrival_not_from_its_last_start(start, botapi_bot, fake_comfy):
    courier = await start(COURIER_PIPELINE_DEPTH="1")
    before = time.monotonic()
    await running_and_queued(courier, fake_comfy, botapi_bot, 2)
    await asyncio.sleep(2.0)  # the second command waits in the queue this long: the time to be counted
    fake_comfy.resume()
    first, second = await status_with(botapi_bot, "Done in", count=2)
    seconds = float(re.fullmatch(r"Done in ([0-9.]+) s\.", second)[1])
    assert seconds >= 2.0, (first, second)  # before: only the second job's own run, well under a second
    assert seconds <= time.monotonic() - before + 0.5  # and not more than since it was sent
    assert await job_statuses(courier) == ["succeeded"] * 2


async def test_a_file_telegram_refuses_is_named_with_the_reason(courier, botapi_bot):
    botapi_bot.fail("sendDocument", status=400, description="Bad Request: wrong type of the web page content")
    botapi_bot.inject_text(USER, "/demo anything")
    (text,) = await status_with(botapi_bot, "/demo failed")
    assert re.fullmatch(r"/demo failed: Telegram would not take \S+\.png \((?i:.*wrong type of the web page content)\)",
                        text), text
    assert not [t for t in said(botapi_bot) if "incident" in t]
    assert await job_statuses(courier) == ["failed"]


async def test_a_file_telegram_refuses_is_named_not_an_incident(courier, botapi_bot):
    botapi_bot.fail("sendDocument", status=400, times=1, description="Bad Request: file must be non-empty")
    botapi_bot.inject_text(USER, "/demo anything")
    (text,) = await status_with(botapi_bot, "/demo failed")
    assert re.fullmatch(r"/demo failed: Telegram would not take \S+\.png \(File must be non-empty\)", text), text
    assert len([c for c in botapi_bot.calls if c.method == "sendDocument"]) == 1  # a refusal is not tried again


def help_groups(text: str) -> list[list[str]]:
    """The command names of each group of /help's list (groups are parted by a blank line)."""
    return [re.findall(r"^/([a-z_]+) — ", block, re.M) for block in text.split("\n\n")]


async def test_help_lists_every_command_the_user_may_use_grouped(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/help")
    groups = [g for g in help_groups(await reply_with(botapi_bot, "Commands:")) if g]
    assert "demo" in groups[0] and "status" not in groups[0]
    assert groups[1] == ["status", "cancel", "history", "quota", "lang", "forget", "settings", "models", "app"]
    assert len(groups) == 2  # no admin commands for a user


async def test_an_admin_s_help_also_lists_the_admin_commands(courier, botapi_bot):
    botapi_bot.emulator.add_user(ADMIN, "Ada")
    botapi_bot.inject_text(ADMIN, "/help")
    text = await reply_with(botapi_bot, "Commands:", chat_id=ADMIN)
    groups = [g for g in help_groups(text) if g]
    assert groups[1] == ["status", "cancel", "history", "quota", "lang", "forget", "settings", "models", "app"]
    assert {"allow", "disallow", "queue", "ban", "unban", "stats", "bench", "compare", "backends"} == set(groups[2])
    assert "For admins:" in text


async def test_a_long_echo_is_cut_to_fit_not_answered_with_an_incident(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/help " + "x" * 4085)
    reply = await reply_with(botapi_bot, "I don't know /")
    assert len(reply) <= MessageLimit.MAX_TEXT_LENGTH and "x…" in reply
    assert reply.endswith("Send /help for the list of commands.")  # the message's own words are whole
    botapi_bot.inject_text(USER, "/demo --" + "a" * 4085)
    reply = await reply_with(botapi_bot, "has no option")
    assert "a…" in reply and reply.startswith("/demo has no option --a") and len(reply) < 500
    assert not [t for t in said(botapi_bot) if INCIDENT in t]


def album(botapi_bot, group: str, count: int, caption: str | None = None) -> None:
    """An album of ``count`` photos in one update batch, as Telegram sends it: one message each, the
    caption (if any) on the first."""
    chat = {"id": USER, "type": "private", "first_name": "Ann"}
    for index in range(count):
        message = {"message_id": 500 + index + 100 * int(group), "from": botapi_bot.emulator.user(USER),
                   "chat": chat, "date": 1767225600, "media_group_id": group,
                   "photo": [{"file_id": f"AgAC{group}x{index}", "file_unique_id": f"AQAD{group}x{index}",
                              "width": 64, "height": 48, "file_size": 900}]}
        if caption and index == 0:
            message.update(caption=caption, caption_entities=[
                {"type": "bot_command", "offset": 0, "length": len(caption.split()[0])}])
        botapi_bot.inject_update({"message": message})


def hints(botapi_bot) -> int:
    return sum(i18n.text("en", "hint_media") == t for t in said(botapi_bot))


async def test_an_album_gets_one_hint_and_none_with_a_command_caption(courier, botapi_bot):
    album(botapi_bot, "1", 10)
    await botapi_bot.emulator.wait_for(lambda: hints(botapi_bot) >= 1)
    album(botapi_bot, "2", 10, caption="/demo a fox")
    await reply_with(botapi_bot, "/demo")  # its "Queued" (or "Rendering") status
    await status_with(botapi_bot, "Done in")
    await until(lambda: _inbox_empty(courier), "every update of the albums handled")
    assert hints(botapi_bot) == 1
    assert await job_statuses(courier) == ["succeeded"]


async def _inbox_empty(courier) -> bool:
    async with courier.store.pool.acquire() as conn:
        return await conn.fetchval("SELECT count(*) FROM courier_polled_updates WHERE handled_at IS NULL") == 0


def press_with(botapi_bot, data: str, user_id: int = USER) -> dict:
    """A press carrying ``data`` under the bot's last message, whatever its buttons (an older deployment's)."""
    message = next(m for m in reversed(botapi_bot.history(user_id)) if m.get("from", {}).get("id") == botapi_bot.id)
    return botapi_bot.inject_update({"callback_query": {
        "id": f"q{data}", "from": botapi_bot.emulator.user(user_id), "message": message,
        "chat_instance": "1", "data": data}})["callback_query"]


async def answer_to(botapi_bot, query: dict) -> dict:
    try:
        call = await botapi_bot.wait_for_call(
            "answerCallbackQuery", where=lambda c: c.params["callback_query_id"] == query["id"], timeout=10)
    except TimeoutError:
        raise AssertionError(f"the press {query['data']!r} was never answered") from None
    return call.params


@pytest.mark.parametrize("data", ["lang:xx", "garbage", "r:z:token", "r:i:", "old:v1:42", "lang:"])
async def test_every_button_press_is_answered(courier, botapi_bot, data):
    botapi_bot.inject_text(USER, "/lang")
    await reply_with(botapi_bot, "")
    answer = await answer_to(botapi_bot, press_with(botapi_bot, data))
    assert answer["text"] == "This button no longer works." and answer.get("show_alert") is True


async def test_a_stale_button_is_answered_in_the_user_s_language(courier, botapi_bot):
    botapi_bot.emulator.add_user(USER, "Ann", language_code="de")
    botapi_bot.inject_text(USER, "/lang")
    await reply_with(botapi_bot, "")
    answer = await answer_to(botapi_bot, press_with(botapi_bot, "garbage"))
    assert answer["text"] == i18n.text("de", "button_stale") != i18n.text("en", "button_stale")


async def test_repeated_info_presses_send_one_message_per_result_every_10_s(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/demo a fox")
    call = await botapi_bot.wait_for_call("sendPhoto", timeout=30)  # the buttons ride on the result's photo
    info = next(b["callback_data"] for row in call.params["reply_markup"]["inline_keyboard"] for b in row
                if b["callback_data"].startswith("r:i:"))
    presses = [botapi_bot.inject_callback_query(USER, call.result["message_id"], info) for _ in range(30)]
    answers = [await answer_to(botapi_bot, query) for query in presses]

    def infos():
        return [c for c in botapi_bot.outbox if c.method == "sendMessage" and "<code>/demo" in c.params["text"]]

    await botapi_bot.emulator.wait_for(infos, timeout=30)  # it waits for the chat's share of Telegram's limit
    assert len(infos()) == 1
    assert sum(a.get("text") == i18n.text("en", "info_shown") for a in answers) == 29


@pytest.mark.parametrize(("text", "prompt", "seed"), [
    ("/demo --seed=5 a fox", "a fox", 5),
    ("/demo a fox --seed=7", "a fox", 7),
    ("/demo --ar=16:9 --seed=9 a fox", "a fox", 9),
])
async def test_key_equals_value_is_an_option(courier, botapi_bot, text, prompt, seed):
    botapi_bot.inject_text(USER, text)
    await status_with(botapi_bot, "Done in")
    async with courier.store.pool.acquire() as conn:
        (params,) = [row["params"] for row in await conn.fetch("SELECT params FROM courier_jobs")]
    assert (params["prompt"], params["seed"]) == (prompt, seed)


@pytest.mark.parametrize("text", ["/demo --", "/demo a fox -- sitting", "/demo -- --seed 3 a fox"])
async def test_a_bare_double_dash_is_refused_clearly(courier, botapi_bot, text):
    botapi_bot.inject_text(USER, text)
    reply = await reply_with(botapi_bot, "alone is no option")
    assert "--seed 7" in reply and "/demo takes --seed" in reply
    assert await job_statuses(courier) == []
