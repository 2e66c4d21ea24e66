"""Refusals told once per burst (``bot/refusals.py``): the memory of what was told, on a fake clock, and
the sender that never lets such replies take more than their share. End to end (strangers, bans, the cap
and the quotas against the Bot API emulator) in tests/security/test_telegram_stranger.py and
test_malicious_user.py."""

import asyncio

from comfyui_courier.bot import refusals
from comfyui_courier.bot.refusals import BANNED, BUSY, STRANGER, Refusals


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_refusal_is_due_once_per_its_repeat_time_for_each_user_and_kind():
    clock = Clock()
    told = Refusals(clock)
    assert told.due(STRANGER, 1)
    assert not told.due(STRANGER, 1)
    assert told.due(STRANGER, 2) and told.due(BANNED, 1)  # another user, another kind
    clock.now += refusals.REPEAT_S[STRANGER] - 1
    assert not told.due(STRANGER, 1)
    clock.now += 1
    assert told.due(STRANGER, 1)
    assert told.due(BUSY, 1) and not told.due(BUSY, 1)
    clock.now += refusals.REPEAT_S[BUSY]  # a command at the cap some seconds later is told again
    assert told.due(BUSY, 1)


def test_being_let_in_ends_a_stretch_of_refusals():
    told = Refusals(Clock())
    assert told.due(STRANGER, 1) and told.due(BANNED, 1)
    told.let_in(1)  # /allow, then /disallow or /ban: told at once
    assert told.due(STRANGER, 1) and told.due(BANNED, 1)


def test_the_memory_is_bounded_and_forgets_the_least_recently_told(monkeypatch):
    monkeypatch.setattr(refusals, "MAX_REMEMBERED", 3)
    told = Refusals(Clock())
    for user in (1, 2, 3, 4):
        assert told.due(STRANGER, user)
    assert len(told._told) == 3
    assert told.due(STRANGER, 1)  # forgotten: told again
    assert not told.due(STRANGER, 4)


class Message:
    """What ``tell`` uses of a python-telegram-bot Message: its chat and ``reply_text``."""

    def __init__(self, chat_id: int, sent: list, held: asyncio.Event):
        self.chat_id, self._sent, self._held = chat_id, sent, held

    async def reply_text(self, text: str):
        await self._held.wait()
        self._sent.append((self.chat_id, text))


async def test_replies_go_in_the_background_one_at_a_time_and_past_the_waiting_bound_are_dropped(monkeypatch):
    monkeypatch.setattr(refusals, "MAX_WAITING", 5)
    told, sent, held = Refusals(), [], asyncio.Event()
    for user in range(1, 9):  # returns at once, whatever the sends wait for
        told.tell(STRANGER, user, Message(user, sent, held), f"no {user}")
    assert sent == []
    assert told.due(STRANGER, 7)  # dropped past the bound: not counted as told
    held.set()
    await asyncio.wait_for(told._sender, 10)
    assert sent == [(user, f"no {user}") for user in range(1, 6)]
    await told.close()
