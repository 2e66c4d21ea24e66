"""The rate limiter (bot/limiter.py, bot/windows.py): Telegram's limits kept exactly.

The window arithmetic on a fake clock; then real python-telegram-bot against the emulator with
its flood limits on (``enforce_limits``: 429 past them, as Telegram), whose request log shows what
Telegram would have counted: a burst to 100 chats never passes 30 in any second, one chat flooded
never passes 13 in any 10 s nor 3 in any 1 s, a 429 in one chat pauses that chat only, and two hosts of one bot
sharing one PostgreSQL (bot/fleet.py) stay within 30 in any second together.
"""

import asyncio
import contextlib
import io
import random

import pytest
from PIL import Image
from telegram import InputMediaPhoto
from telegram.error import RetryAfter
from telegram.ext import ExtBot
from telegram.request import HTTPXRequest

from comfyui_courier.bot.fleet import BATCH, FleetSlots
from comfyui_courier.bot.limiter import ResultsFirstLimiter
from comfyui_courier.bot.windows import FloodHits, Gate, Limit, SlidingWindow, messages_in
from comfyui_courier.emulator.botapi.limits import busiest, is_message
from comfyui_courier.store import send_slots
from comfyui_courier.store.pool import create_pool

pytestmark = pytest.mark.timeout(60)


# --- the arithmetic, on a fake clock ---------------------------------------------------------------

def test_a_slot_is_held_until_a_period_after_its_answer():
    window = SlidingWindow(Limit(2, 1.0))
    assert window.wait(0.0) == 0
    window.take()
    window.take()
    assert window.wait(0.0) is None  # both on their way: free a period after the first answer
    window.done(0.3)
    assert window.wait(0.5) == pytest.approx(0.8)
    window.done(0.4)
    assert window.wait(1.29) == pytest.approx(0.01)
    assert window.wait(1.3) == 0 and not window.idle(1.3)
    assert window.idle(1.4)


@pytest.mark.parametrize("seed", range(5))
def test_however_long_requests_take_no_period_at_telegram_sees_more_than_the_limit(seed):
    """Requests let go whenever the window allows, each answered after a random time and counted by
    Telegram at a random moment on its way: the busiest second holds the limit, never more."""
    rng = random.Random(seed)
    window = SlidingWindow(Limit(5, 1.0))
    now, on_the_way, seen = 0.0, [], []
    while now < 60:
        now += rng.uniform(0, 0.05)
        for answered in sorted(at for at in on_the_way if at <= now):
            window.done(answered)
            on_the_way.remove(answered)
        while window.wait(now) == 0 and rng.random() < 0.8:
            window.take()
            latency = rng.expovariate(10)
            on_the_way.append(now + latency)
            seen.append(now + rng.uniform(0, latency))
    assert busiest(seen, 1.0) == 5


async def test_a_waiting_status_message_goes_after_at_most_status_every_results():
    """Results first, but a stream of them does not starve a queue message: with ``status_every=2``
    the two waiting status messages go after the second and the fourth result."""
    gate = Gate(Limit(1, 0.01), status_every=2)
    await gate.enter()  # the one slot is held: everything below waits in the gate
    order = []

    async def send(kind: str) -> None:
        await gate.enter(status=kind == "s")
        order.append(kind)
        gate.done()

    sending = [asyncio.create_task(send(kind)) for kind in "ss" + "r" * 6]
    await asyncio.sleep(0)  # each has entered the gate
    gate.done()
    await asyncio.gather(*sending)
    assert "".join(order) == "rrsrrsrr"


def test_429s_from_several_chats_at_once_are_the_limit_of_all_chats():
    hits = FloodHits(several=3, within=5.0)
    assert not hits.hit(1, 0.0)
    assert not hits.hit(1, 1.0)  # the same chat again: its own limit
    assert not hits.hit(2, 2.0)
    assert hits.hit(3, 3.0)
    assert not hits.hit(4, 7.5)  # chats 1 and 2 are more than 5 s ago: 3 and 4 only


def test_messages_count_and_nothing_else():
    chat = {"chat_id": 5}
    assert all(messages_in(m, chat) == 1 for m in ("sendMessage", "sendDocument", "editMessageText",
                                                   "editMessageMedia", "deleteMessage", "copyMessage",
                                                   "forwardMessage"))
    assert not any(messages_in(m, chat) for m in ("sendChatAction", "getFile", "answerCallbackQuery", "getChat"))
    assert not messages_in("deleteMyCommands", {}) and not messages_in("deleteWebhook", {})
    assert messages_in("sendMediaGroup", {**chat, "media": ("photo",) * 4}) == 4  # each item is a message


def test_an_album_waits_until_all_its_slots_are_free_at_once():
    window = SlidingWindow(Limit(5, 1.0))
    window.take(3)
    assert window.wait(0.0, 2) == 0
    assert window.wait(0.0, 3) is None  # 3 on their way: nothing frees before their answers
    window.done(0.2, 3)
    assert window.wait(0.5, 3) == pytest.approx(0.7)  # one more than the 2 free: the first freed
    assert window.wait(0.5, 9) == pytest.approx(0.7)  # never more than the window: all 5 free then
    window.take(2)
    window.done(0.6, 2)
    assert window.wait(1.0, 4) == pytest.approx(0.6)  # 2 of the 3 answered at 0.2, then the 2 at 0.6


async def test_429s_from_several_chats_pause_every_chat_and_from_one_only_it():
    limiter = ResultsFirstLimiter(max_retries=1)
    await limiter.initialize()
    loop = asyncio.get_running_loop()
    sent: dict[int, list[float]] = {}

    def request(chat: int, refused: int):
        async def callback():
            sent.setdefault(chat, []).append(loop.time())
            if len(sent[chat]) <= refused:
                raise RetryAfter(1)
            return True
        return limiter.process_request(callback, (), {}, "sendMessage", {"chat_id": chat}, None)

    flooded = asyncio.create_task(request(1, refused=1))
    while not sent:
        await asyncio.sleep(0)
    await request(2, refused=0)  # chat 1 waits out its retry_after, chat 2 does not
    assert len(sent[1]) == 1 and sent[2][0] - sent[1][0] < 0.5
    await flooded
    assert sent[1][1] - sent[1][0] >= 1.0
    three = [asyncio.create_task(request(chat, refused=1)) for chat in (3, 4, 5)]
    while len(sent) < 5:  # each 429 is taken in as its callback raises, before this task runs again
        await asyncio.sleep(0)
    await request(6, refused=0)  # three chats had a 429 within 5 s: every chat waits
    assert sent[6][0] - sent[5][0] >= 1.0
    await asyncio.gather(*three)
    await limiter.shutdown()


# --- real python-telegram-bot on the emulator, Telegram's flood limits on ------------------------

def bot(botapi, emulated, limiter) -> ExtBot:
    return ExtBot(emulated.token, base_url=botapi.base_url, base_file_url=botapi.base_file_url, rate_limiter=limiter,
                  request=HTTPXRequest(connection_pool_size=128))


def message_times(emulated, chat: int | None = None) -> list[float]:
    """When each message reached the emulator, 429s included: what Telegram counts."""
    return [call.received_at for call in emulated.calls
            if is_message(call.method, call.params) and chat in (None, call.params["chat_id"])]


def album(photos: int = 4) -> list[InputMediaPhoto]:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, "PNG")
    return [InputMediaPhoto(buffer.getvalue()) for _ in range(photos)]


def refused(emulated) -> list:
    return [call for call in emulated.calls if call.status == 429]


async def test_a_burst_to_100_chats_never_passes_30_in_any_second(botapi, botapi_bot):
    chats = range(1001, 1101)
    for chat in chats:
        botapi_bot.inject_text(chat, "/start")
    botapi_bot.enforce_limits()
    async with bot(botapi, botapi_bot, ResultsFirstLimiter(max_retries=0)) as tg:
        sent = await asyncio.gather(*(tg.send_message(chat, "result") for chat in chats), return_exceptions=True)
    assert [error for error in sent if isinstance(error, Exception)] == [] and refused(botapi_bot) == []
    assert busiest(message_times(botapi_bot), 1.0) == 30


async def test_albums_count_each_item_and_a_burst_of_them_never_passes_30_in_any_second(botapi, botapi_bot):
    """Eight albums of four photos, to eight chats at once: 32 messages, so the last waits for the
    first ones' second to pass, rather than being refused as Telegram (the emulator) would."""
    chats = range(2001, 2009)
    for chat in chats:
        botapi_bot.inject_text(chat, "/start")
    botapi_bot.enforce_limits()
    async with bot(botapi, botapi_bot, ResultsFirstLimiter(max_retries=0)) as tg:
        sent = await asyncio.gather(*(tg.send_media_group(chat, album()) for chat in chats), return_exceptions=True)
    assert [error for error in sent if isinstance(error, Exception)] == [] and refused(botapi_bot) == []
    albums = sorted(call.received_at for call in botapi_bot.calls if call.method == "sendMediaGroup")
    assert len(albums) == 8 and albums[-1] - albums[0] >= 1.0


async def test_one_chat_flooded_never_passes_13_in_any_10_s(botapi, botapi_bot):
    botapi_bot.inject_text(77, "/start")
    botapi_bot.enforce_limits()
    async with bot(botapi, botapi_bot, ResultsFirstLimiter(max_retries=0)) as tg:
        sent = await asyncio.gather(*(tg.send_message(77, f"result {i}") for i in range(14)), return_exceptions=True)
    assert [error for error in sent if isinstance(error, Exception)] == [] and refused(botapi_bot) == []
    times = sorted(message_times(botapi_bot, 77))
    assert busiest(times, 10.0) == 13 and times[13] - times[0] >= 10.0


async def test_a_burst_to_one_chat_never_passes_3_in_any_second(botapi, botapi_bot):
    """Seven messages to one chat at once (Telegram's FAQ: about one a second in a chat): three go
    at once (a result's document and photo plus a status), the rest each a second after a slot's answer."""
    botapi_bot.inject_text(78, "/start")
    botapi_bot.enforce_limits()
    async with bot(botapi, botapi_bot, ResultsFirstLimiter(max_retries=0)) as tg:
        sent = await asyncio.gather(*(tg.send_message(78, f"result {i}") for i in range(7)), return_exceptions=True)
    assert [error for error in sent if isinstance(error, Exception)] == [] and refused(botapi_bot) == []
    times = sorted(message_times(botapi_bot, 78))
    assert len(times) == 7 and busiest(times, 1.0) == 3 and times[3] - times[0] >= 1.0


async def test_a_429_in_one_chat_pauses_that_chat_while_the_others_go_on(botapi, botapi_bot):
    """Chat 1 gets a 429 (retry after 3 s); chats 2 and 3 then send 6 messages each (two seconds'
    worth in a chat), one after another: all of them reach Telegram before chat 1 tries again
    (AIORateLimiter held them all)."""
    for chat in (1, 2, 3):
        botapi_bot.inject_text(chat, "/start")
    botapi_bot.fail("sendMessage", retry_after=3)
    async with bot(botapi, botapi_bot, ResultsFirstLimiter(max_retries=1)) as tg:
        flooded = asyncio.create_task(tg.send_message(1, "first"))
        await botapi.wait_for(lambda: refused(botapi_bot))

        async def in_turn(chat: int) -> None:
            for i in range(6):
                await tg.send_message(chat, f"message {i}")

        await asyncio.gather(in_turn(2), in_turn(3))
        await flooded
    [first, retried] = message_times(botapi_bot, 1)
    others = message_times(botapi_bot, 2) + message_times(botapi_bot, 3)
    assert retried - first >= 3.0 and len(others) == 12 and max(others) < retried


# --- the fleet: every host of one bot, through PostgreSQL ------------------------------------------

async def test_the_ledger_holds_a_slot_until_a_period_after_its_answer(store):
    key = b"k" * 32

    async def take(wanted: int, answered=(), open_s: float = 60.0, bot: bytes = key):
        return await send_slots.take(store.pool, bot, wanted, 6, 60.0, open_s=open_s, poll_s=0.05,
                                     answered=list(answered))

    first, wait_s = await take(4)
    assert len(first) == 4 and wait_s == 0
    more, wait_s = await take(4)
    assert len(more) == 2 and wait_s == 0.05  # all six on their way: ask again soon
    assert len((await take(4, bot=b"o" * 32))[0]) == 4  # another bot's ledger
    none, wait_s = await take(1, [(slot, 0.0) for slot in first + more])
    assert none == [] and 59 < wait_s <= 60  # answered just now: held for the period
    assert len((await take(6, [(slot, 61.0) for slot in first + more]))[0]) == 6  # answered over a period ago
    gone = b"g" * 32
    assert len((await take(6, open_s=0, bot=gone))[0]) == 6
    assert len((await take(6, bot=gone))[0]) == 6  # never answered: let go when open_s ran out
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM courier_send_bots") == 3


@contextlib.asynccontextmanager
async def two_hosts(botapi, emulated, store, pg_database):
    """Two hosts of one bot, each with a pool of its own on one database: their bots, sharing the fleet's slots."""
    other_pool = await create_pool(pg_database)
    try:
        hosts = [bot(botapi, emulated, ResultsFirstLimiter(max_retries=0, fleet=FleetSlots(pool, emulated.token)))
                 for pool in (store.pool, other_pool)]
        async with hosts[0] as first, hosts[1] as second:
            yield [first, second]
    finally:
        await other_pool.close()


async def test_two_hosts_of_one_bot_stay_within_30_in_any_second_together(botapi, botapi_bot, store, pg_database,
                                                                          monkeypatch):
    """Each host alone would send 30 in a second; through the shared ledger the two together do, in
    round trips that take several slots while several messages wait."""
    chats = range(2001, 2081)
    for chat in chats:
        botapi_bot.inject_text(chat, "/start")
    botapi_bot.enforce_limits()
    asked = []
    real_take = send_slots.take

    async def counting_take(*args, **kwargs):
        asked.append(args[2])
        return await real_take(*args, **kwargs)

    monkeypatch.setattr(send_slots, "take", counting_take)
    async with two_hosts(botapi, botapi_bot, store, pg_database) as hosts:
        sent = await asyncio.gather(*(host.send_message(chat, "result")
                                      for chat, host in zip(chats, hosts * 40, strict=True)), return_exceptions=True)
    assert [error for error in sent if isinstance(error, Exception)] == [] and refused(botapi_bot) == []
    assert busiest(message_times(botapi_bot), 1.0) <= 30
    assert max(asked) == BATCH and len([wanted for wanted in asked if wanted]) < len(chats)  # several a round trip
    async with store.pool.acquire() as conn:  # every answer reported: no slot waits for its host to be declared dead
        assert await conn.fetchval("SELECT count(*) FILTER (WHERE NOT answered) FROM courier_send_slots") == 0


async def test_two_hosts_sending_albums_take_a_fleet_slot_for_each_item(botapi, botapi_bot, store, pg_database):
    """Sixteen albums of four from two hosts: 64 messages, never more than 30 in any second at
    Telegram's end, and every slot taken for them is reported answered."""
    chats = range(3001, 3017)
    for chat in chats:
        botapi_bot.inject_text(chat, "/start")
    botapi_bot.enforce_limits()
    async with two_hosts(botapi, botapi_bot, store, pg_database) as hosts:
        sent = await asyncio.gather(*(host.send_media_group(chat, album())
                                      for chat, host in zip(chats, hosts * 8, strict=True)), return_exceptions=True)
    assert [error for error in sent if isinstance(error, Exception)] == [] and refused(botapi_bot) == []
    albums = sorted(call.received_at for call in botapi_bot.calls if call.method == "sendMediaGroup")
    assert busiest([at for at in albums for _ in range(4)], 1.0) <= 30 and albums[-1] - albums[0] >= 2.0
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FILTER (WHERE NOT answered) FROM courier_send_slots") == 0


async def test_while_the_database_is_out_of_reach_each_host_keeps_its_own_window(botapi, botapi_bot, pg_database):
    for chat in (1, 2, 3):
        botapi_bot.inject_text(chat, "/start")
    gone = await create_pool(pg_database)
    await gone.close()
    async with bot(botapi, botapi_bot, ResultsFirstLimiter(max_retries=0, fleet=FleetSlots(gone, "1:x"))) as tg:
        await asyncio.gather(*(tg.send_message(chat, "result") for chat in (1, 2, 3)))
    assert len(message_times(botapi_bot)) == 3
