"""The message shape of a job (issue 19, items 1 and 2), counted on the Bot API emulator with the real
bot, PostgreSQL and the fake ComfyUI: a /demo job that starts at once costs 3 requests at most (its
document, and its photo with the buttons and "Done in" as caption), a queued one 4 (the chat's queue
message, which becomes its status); a status is posted once and nothing deleted, also when the job
starts on another host while the queue message is on its way; a flood of commands from one user
gets one queue message, edited; where a job's status goes is decided in PostgreSQL."""

import asyncio
import contextlib

import pytest

from comfyui_courier.bot import job_messages, queue_message
from comfyui_courier.store import backends, jobs, queue_messages
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.jobs import enqueue
from comfyui_courier.tests.support.polling import until

USER = 919
DEAD_BACKEND = "http://127.0.0.1:9"  # nothing listens: a host with it claims no job


def requests_since(bot, first: int) -> list[str]:
    """The methods of the bot's requests after the first ``first`` (its polling aside)."""
    return [c.method for c in bot.calls[first:] if c.method != "getUpdates"]


async def settled(pool) -> bool:
    """Every job ended and no queue message (``courier-queue-<chat>`` tasks) has anything left to do."""
    async with pool.acquire() as conn:
        busy = await conn.fetchval("SELECT count(*) FROM courier_jobs WHERE status IN ('queued', 'running')")
    return not busy and not [t for t in asyncio.all_tasks() if t.get_name().startswith("courier-queue")]


async def settled_queue(pool) -> bool:
    """No queue message is being updated (no ``courier-queue-<chat>`` task) and none is held."""
    async with pool.acquire() as conn:
        held = await conn.fetchval("SELECT count(*) FROM courier_queue_messages WHERE busy_until > now()")
    return not held and not [t for t in asyncio.all_tasks() if t.get_name().startswith("courier-queue")]


async def drained(pool, url: str, draining: bool) -> None:
    (row,) = [b for b in await backends.list_backends(pool) if b.url == url]
    await backends.set_backend(pool, row.id, draining=draining)


def long_moments(monkeypatch, *modules) -> None:
    """A moment of 30 s where ``modules`` wait one: a job counts as done within it however loaded
    the machine is (CI), so the shape counted is the one the test means."""
    for module in modules:
        monkeypatch.setattr(module, "MOMENT_S", 30.0)


@contextlib.asynccontextmanager
async def courier_on(botapi, botapi_bot, pg_database, backend_url, tmp_path, **env):
    async with running_courier(botapi, botapi_bot, pg_database, backend_url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER), **env) as courier:
        yield courier, courier.store.pool


@pytest.mark.timeout(120)
async def test_a_demo_job_that_starts_at_once_costs_three_requests(botapi, botapi_bot, pg_database, fake_comfy,
                                                                   tmp_path, monkeypatch):
    long_moments(monkeypatch, job_messages, queue_message)
    async with courier_on(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                          COURIER_PROGRESS_INTERVAL_S="30") as (_, pool):
        first = len(botapi_bot.calls)
        botapi_bot.inject_text(USER, "/demo a fox")
        photo = await botapi_bot.wait_for_call("sendPhoto", timeout=60)
        await until(lambda: settled(pool), 30, "the job ended and its chat's queue message settled")
    methods = requests_since(botapi_bot, first)
    assert sorted(methods) == ["sendDocument", "sendPhoto"] and len(methods) <= 3, methods
    assert photo.params["caption"].startswith("Done in") and photo.result["reply_markup"]["inline_keyboard"]


@pytest.mark.timeout(120)
async def test_a_queued_demo_job_costs_four_requests_its_queue_message_becoming_its_status(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path, monkeypatch):
    long_moments(monkeypatch, job_messages)  # the job's; its queue message goes out after the usual moment
    async with courier_on(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                          COURIER_PROGRESS_INTERVAL_S="30") as (_, pool):
        await drained(pool, fake_comfy.url, True)
        first = len(botapi_bot.calls)
        botapi_bot.inject_text(USER, "/demo a fox")
        queued = await botapi_bot.wait_for_call("sendMessage", timeout=30)
        assert queued.params["text"].startswith("Queued /demo — position 1"), queued.params
        await drained(pool, fake_comfy.url, False)
        done = await botapi_bot.wait_for_call("editMessageText", timeout=60,
                                              where=lambda c: c.params["text"].startswith("Done in"))
        await until(lambda: settled(pool), 30, "the job ended and its chat's queue message settled")
    methods = requests_since(botapi_bot, first)
    assert len(methods) <= 4 and sorted(methods) == ["editMessageText", "sendDocument", "sendMessage", "sendPhoto"], \
        methods
    assert done.params["message_id"] == queued.result["message_id"]


@pytest.mark.timeout(180)
async def test_a_job_started_on_another_host_while_its_queue_message_is_on_its_way_posts_no_second_status(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    """The host that takes the updates has no working backend; the other one runs the job and starts
    it while the first host's queue message waits for Telegram: the job's status is that message,
    edited; nothing else is posted and nothing deleted."""
    async with (courier_on(botapi, botapi_bot, pg_database, DEAD_BACKEND, tmp_path / "first") as (_, pool),
                courier_on(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path / "second",
                           COURIER_RECEIVE_UPDATES="0")):
        await drained(pool, fake_comfy.url, True)
        on_its_way = botapi_bot.hold("sendMessage")
        first = len(botapi_bot.calls)
        request = botapi_bot.inject_text(USER, "/demo a fox")
        await botapi.wait_for(lambda: "sendMessage" in requests_since(botapi_bot, first), timeout=30)
        await drained(pool, fake_comfy.url, False)
        await botapi.wait_for(lambda: fake_comfy.prompts, timeout=30)  # running on the second host
        on_its_way.set()
        done = await botapi_bot.wait_for_call("editMessageText", timeout=60,
                                              where=lambda c: c.params["text"].startswith("Done in"))
    posts = [c for c in botapi_bot.calls[first:] if c.method == "sendMessage"]
    assert len(posts) == 1 and posts[0].result["reply_to_message"]["message_id"] == request["message_id"], posts
    assert "deleteMessage" not in requests_since(botapi_bot, first)
    assert done.params["message_id"] == posts[0].result["message_id"]


@pytest.mark.timeout(180)
async def test_a_flood_of_commands_from_one_user_gets_one_queue_message_edited(botapi, botapi_bot, pg_database,
                                                                              fake_comfy, tmp_path):
    count = 20
    async with courier_on(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path, COURIER_MAX_JOBS_PER_USER="50",
                          COURIER_PROGRESS_INTERVAL_S="1") as (_, pool):
        await drained(pool, fake_comfy.url, True)
        first = len(botapi_bot.calls)
        for n in range(count):
            botapi_bot.inject_text(USER, f"/demo fox {n}")
        await botapi.wait_for(lambda: any(c.ok and c.params.get("text", "").count("\n") == count - 1
                                          for c in botapi_bot.calls[first:]), timeout=90)
    methods = requests_since(botapi_bot, first)
    assert methods.count("sendMessage") == 1, methods
    assert set(methods) <= {"sendMessage", "editMessageText"} and len(methods) < count / 2, methods
    (message,) = [c for c in botapi_bot.calls[first:] if c.method == "sendMessage"]
    lines = botapi_bot.calls[first:][-1].params["text"].splitlines()
    assert lines[0].startswith("Queued /demo — position 1") and lines[-1].startswith(f"Queued /demo — position {count}")
    assert message.ok


@pytest.mark.timeout(120)
async def test_stopping_the_bot_sends_the_queue_messages_last_update_without_its_wait(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    """Queue messages are edited once per two progress intervals (here 2 × 60 s): a command queued
    in that wait shows in its chat's message only because the bot, as it stops, sends the update."""
    async with courier_on(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path, COURIER_MAX_JOBS_PER_USER="5",
                          COURIER_PROGRESS_INTERVAL_S="60") as (courier, pool):
        await drained(pool, fake_comfy.url, True)
        botapi_bot.inject_text(USER, "/demo first")
        await botapi.wait_for(lambda: [c for c in botapi_bot.calls if c.ok and c.method == "sendMessage"], timeout=30)
        botapi_bot.inject_text(USER, "/demo second")

        async def both_queued() -> bool:
            return await jobs.count_active(pool, USER) == 2

        await until(both_queued, 30, "both jobs queued")
        stopping = asyncio.get_running_loop().time()
        await courier.bot.stop()
        assert asyncio.get_running_loop().time() - stopping < queue_message.FLUSH_S
    (last,) = [c for c in botapi_bot.calls if c.method == "editMessageText"]
    assert last.ok and last.params["text"].splitlines()[-1].startswith("Queued /demo — position 2"), last.params


async def test_where_a_status_goes_is_decided_in_postgresql(store):
    """A chat's queue message held by a host makes the job's worker wait; once it is settled and the
    chat has no queued job, the job takes it over; only the job's current worker may post one."""
    pool = store.pool
    job_id = (await enqueue(pool, user_id=USER, chat_id=USER, command="demo", params={})).job_id
    assert (await queue_messages.hold(pool, USER, 60, 20)).held == (None, None)  # the first host posts it
    assert await queue_messages.hold(pool, USER, 60, 20) is None  # held: no other host sends it meanwhile
    claimed = await jobs.claim(pool, "second-host", 30)
    assert claimed.id == job_id
    assert await jobs.take_status_message(pool, job_id, "second-host") == ("wait", None)
    assert await jobs.take_status_message(pool, job_id, "gone-host") == ("none", None)
    await queue_messages.settle(pool, USER, 41, "Queued /demo — position 1")
    assert (await queue_messages.hold(pool, USER, 60, 20)).held == (41, "Queued /demo — position 1")  # held again
    await queue_messages.settle(pool, USER, 41, "Queued /demo — position 1")
    assert await jobs.take_status_message(pool, job_id, "second-host") == ("edit", 41)
    assert await jobs.take_status_message(pool, job_id, "second-host") == ("edit", 41)  # it is the job's now
    other = (await enqueue(pool, user_id=USER, chat_id=USER, command="demo", params={})).job_id
    second = await jobs.claim(pool, "second-host", 30)
    assert second.id == other
    assert await jobs.take_status_message(pool, other, "second-host") == ("post", None)  # no queue message left


@pytest.mark.timeout(120)
async def test_a_queue_message_shown_after_the_job_chose_to_post_its_own_status_is_deleted(
        botapi, botapi_bot, pg_database, tmp_path):
    """A round of the chat's queue message reads the queue as its statement's snapshot saw it: it can
    post "Queued" for a job whose worker, meanwhile, chose to post a status of its own (no queue
    message then). Once that status is recorded, the queue message is deleted: the chat is never left
    with a "Queued" line for a job that ran."""
    async with FakeComfyUI(steps=40, step_delay=0.05) as fake, \
            courier_on(botapi, botapi_bot, pg_database, fake.url, tmp_path) as (courier, pool):
        bot = courier.bot.application.bot
        await drained(pool, fake.url, True)
        botapi_bot.inject_text(USER, "/demo a fox")
        first = await botapi_bot.wait_for_call("sendMessage", timeout=30)  # its queue message: gone again
        await until(lambda: settled_queue(pool), 30, "the chat's queue message settled")
        await bot.delete_message(USER, first.result["message_id"])
        await queue_messages.drop(pool, USER)
        status_on_its_way = botapi_bot.hold("sendMessage")
        await drained(pool, fake.url, False)
        await botapi.wait_for(lambda: [c for c in botapi_bot.calls if c.method == "sendMessage"][1:], timeout=30)
        await until(lambda: settled_queue(pool), 30, "the round of the job's start ended")
        stale = await bot.send_message(USER, first.params["text"])  # what the stale round posts
        assert (await queue_messages.hold(pool, USER, 60, 20)).held == (None, None)
        await queue_messages.settle(pool, USER, stale.message_id, stale.text)
        status_on_its_way.set()
        await botapi_bot.wait_for_call("deleteMessage", timeout=30,
                                       where=lambda c: c.params["message_id"] == stale.message_id)
        done = await botapi_bot.wait_for_call("editMessageText", timeout=60,
                                              where=lambda c: c.params["text"].startswith("Done"))
        await until(lambda: settled(pool), 30, "the job ended and its chat's queue message settled")
        async with pool.acquire() as conn:
            assert await conn.fetch("SELECT * FROM courier_queue_messages") == []
    assert done.params["message_id"] not in (stale.message_id, first.result["message_id"])
    assert stale.message_id not in {m["message_id"] for m in botapi_bot.history(USER)}
