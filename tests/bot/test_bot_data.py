"""``BotData`` (bot/context.py): the services handlers reach are typed, not ``object``."""

import typing

from comfyui_courier.bot.context import BotData
from comfyui_courier.jobs.dispatcher import Dispatcher
from comfyui_courier.store import Store


def test_the_store_and_the_dispatcher_are_typed():
    hints = typing.get_type_hints(BotData, localns={"Store": Store, "Dispatcher": Dispatcher})
    assert hints["store"] == Store | None
    assert hints["dispatcher"] == Dispatcher | None
