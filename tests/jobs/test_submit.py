"""Submitting a job (jobs/submit.py) on real PostgreSQL: the cap, commit before the reply, the status message."""

import asyncio
import contextlib

import pytest

from comfyui_courier.jobs.ports import ChatError, DeliveryFailed
from comfyui_courier.jobs.submit import AtCap, Duplicate, Queued, Quota, QuotaSpent, announcing, submit
from comfyui_courier.store import jobs, users

USER, CHAT = 4242, 4242


class Chat:
    """An adapter of ``submit``'s results, as the bot is: records the status replies and refusals;
    message ids count from 100."""

    def __init__(self, fail: bool = False, gate: asyncio.Event | None = None, error: Exception | None = None):
        self.fail = fail
        self.error = error  # raised instead of sending (a timeout, say)
        self.gate = gate  # the reply waits for it, as behind Telegram's rate limit
        self.sending = asyncio.Event()  # a reply is on its way
        self.posted: list[int] = []  # positions
        self.refused: list[int] = []  # counts
        self.deleted: list[int] = []  # message ids

    async def post_status(self, position: int) -> int:
        self.sending.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise DeliveryFailed("Forbidden: bot was blocked by the user")
        if self.error is not None:
            raise self.error
        self.posted.append(position)
        return 99 + len(self.posted)

    async def delete_status(self, message_id: int) -> None:
        self.deleted.append(message_id)

    async def submit(self, pool, **kw) -> int | None:
        """Submit; the job's id, or None after telling the user why not (at the cap)."""
        submitted = await submit(pool, user_id=USER, chat_id=CHAT, command="demo", **kw)
        if isinstance(submitted, AtCap):
            self.refused.append(submitted.active)
        return submitted.job_id if isinstance(submitted, Queued) else None

    async def announce(self, pool, job_id: int) -> int | None:
        """The "Queued" reply, as the adapters send it (``submit.announcing``); the position said."""
        async with announcing(pool, job_id) as reply:
            if reply.position is not None:
                reply.message_id = await self.post_status(reply.position)
        if reply.redundant:
            with contextlib.suppress(ChatError):
                await self.delete_status(reply.message_id)
        return reply.position


async def submit_one(store, chat: Chat, max_active: int | None = 2, **kw):
    """Submit, then announce, as the bot does (there in a task of its own)."""
    job_id = await chat.submit(store.pool, params={"prompt": "a cat"}, max_active=max_active, **kw)
    if job_id is not None:
        await chat.announce(store.pool, job_id)
    return job_id


async def test_a_submitted_job_has_its_status_message_and_the_users_profile(store):
    chat = Chat()
    job_id = await submit_one(store, chat, profile=("ann", "Ann", "de"), reply_to_message_id=7)
    job = await jobs.get_job(store.pool, job_id)
    assert chat.posted == [1]
    assert (job.status, job.status_message_id, job.reply_to_message_id, job.command) == ("queued", 100, 7, "demo")
    user = await users.get_user(store.pool, USER)
    assert (user.username, user.first_name, user.language_code) == ("ann", "Ann", "de")


async def test_at_the_cap_the_user_is_told_and_nothing_is_queued(store):
    chat = Chat()
    assert await submit_one(store, chat) and await submit_one(store, chat)
    assert await submit_one(store, chat) is None
    assert (chat.posted, chat.refused) == ([1, 2], [2])
    assert len(await jobs.list_queue(store.pool, user_id=USER)) == 2


async def test_without_a_cap_every_job_is_queued(store):
    chat = Chat()
    for _ in range(3):
        assert await submit_one(store, chat, max_active=None)
    assert (chat.posted, chat.refused) == ([1, 2, 3], [])


async def test_a_status_reply_that_fails_cancels_the_job(store):
    with pytest.raises(DeliveryFailed):
        await submit_one(store, Chat(fail=True))
    assert await jobs.list_queue(store.pool) == []


@pytest.mark.timeout(60)
async def test_the_job_is_committed_and_claimable_while_its_reply_waits(store):
    """The reply waits (Telegram's rate limit) holding no lock: the job can be claimed, and the
    same user's next command is counted meanwhile."""
    chat = Chat(gate=asyncio.Event())
    first = asyncio.create_task(submit_one(store, chat, max_active=1))
    await asyncio.wait_for(chat.sending.wait(), 10)
    claimed = await jobs.claim(store.pool, "w", 60)
    assert claimed is not None and (claimed.status, claimed.status_message_id) == ("running", None)
    assert await asyncio.wait_for(submit_one(store, Chat(), max_active=1), 10) is None  # the cap still holds
    chat.gate.set()
    assert await first == claimed.id
    assert (await jobs.get_job(store.pool, claimed.id)).status_message_id == 100


@pytest.mark.timeout(60)
async def test_a_queued_reply_in_flight_is_deleted_when_the_dispatcher_posted_first(store):
    chat = Chat(gate=asyncio.Event())
    submitting = asyncio.create_task(submit_one(store, chat))
    await asyncio.wait_for(chat.sending.wait(), 10)
    claimed = await jobs.claim(store.pool, "w", 60)
    assert claimed is not None
    adopted = await jobs.adopt_status_message(store.pool, claimed.id, 555)
    assert adopted.message_id == 555  # the dispatcher's "Rendering"
    chat.gate.set()
    await submitting
    assert (chat.posted, chat.deleted) == ([1], [100])
    assert (await jobs.get_job(store.pool, claimed.id)).status_message_id == 555


@pytest.mark.timeout(60)
async def test_a_reply_that_times_out_withdraws_a_queued_job_but_not_a_started_one(store):
    with pytest.raises(TimeoutError):
        await submit_one(store, Chat(error=TimeoutError()))
    assert await jobs.list_queue(store.pool) == []
    chat = Chat(gate=asyncio.Event(), error=TimeoutError())
    submitting = asyncio.create_task(submit_one(store, chat))
    await asyncio.wait_for(chat.sending.wait(), 10)
    claimed = await jobs.claim(store.pool, "w", 60)
    chat.gate.set()
    assert await submitting == claimed.id  # no error: the dispatcher's status message stands in
    assert (await jobs.get_job(store.pool, claimed.id)).status == "running"


async def test_no_queued_reply_for_a_job_that_started_before_it(store):
    chat = Chat()
    job_id = await chat.submit(store.pool, params={})
    assert (await jobs.claim(store.pool, "w", 60)).id == job_id
    assert await chat.announce(store.pool, job_id) is None
    assert (chat.posted, chat.deleted) == ([], [])


async def test_an_update_submitted_twice_queues_one_job_and_is_told_once(store):
    chat = Chat()
    update = (7000, 12, 0)
    assert await submit_one(store, chat, update=update) is not None
    assert await submit_one(store, chat, update=update) is None  # redelivered: nothing, not even a refusal
    assert await submit_one(store, chat, update=(7001, 12, 0)) is not None  # another bot's update 12
    assert await submit_one(store, chat, max_active=3, update=(7000, 12, 1)) is not None  # its 2nd job (--n 2)
    assert (chat.posted, chat.refused) == ([1, 2, 3], [])
    assert len(await jobs.list_queue(store.pool, user_id=USER)) == 3


async def test_an_update_refused_at_the_cap_is_refused_once(store):
    chat = Chat()
    await submit_one(store, chat, max_active=1)
    assert await submit_one(store, chat, max_active=1, update=(7000, 5, 0)) is None
    assert await submit_one(store, chat, max_active=1, update=(7000, 5, 0)) is None
    assert chat.refused == [1]


@pytest.mark.timeout(60)
async def test_the_cap_holds_under_a_flood_of_one_users_commands(store):
    """40 commands of one user at once, each in its own connection: exactly the cap is queued."""
    chat = Chat()
    queued = await asyncio.gather(*(chat.submit(store.pool, params={}, max_active=3, update=(7000, n, 0))
                                    for n in range(40)))
    assert len([job_id for job_id in queued if job_id is not None]) == 3
    assert sorted(chat.refused) == [3] * 37
    assert len(await jobs.list_queue(store.pool, user_id=USER)) == 3


async def test_submit_says_what_happened_as_a_value_and_tells_nobody(store):
    """Queued, at the cap, a duplicate update, the quota spent: each a value to assert, no chat needed."""
    def ask(**kw):
        return submit(store.pool, user_id=USER, chat_id=CHAT, command="demo", params={}, **kw)

    first = await ask(max_active=1, update=(7000, 1, 0))
    assert isinstance(first, Queued) and (await jobs.get_job(store.pool, first.job_id)).status == "queued"
    assert await ask(max_active=1, update=(7000, 2, 0)) == AtCap(1)
    assert await ask(max_active=1, update=(7000, 1, 0)) == Duplicate()
    hourly = Quota(per_hour=1, per_day=0)
    assert isinstance(await ask(quota=hourly), Queued)  # counted against the quota from here on
    assert await ask(quota=hourly) == QuotaSpent("hour")
    assert len(await jobs.list_queue(store.pool, user_id=USER)) == 2
