"""The emulator's flood limits (``emulator/botapi/limits.py``): off by default, and when a test turns
them on, a message past 30 in any second, 13 in any 10 s or 3 in any 1 s in a private chat or 20 in
any minute in a group is answered 429 with retry_after, as Telegram does; chat actions and callback answers are free."""

import aiohttp
import pytest

from comfyui_courier.emulator.botapi.limits import FloodLimits, busiest, is_message

pytestmark = pytest.mark.timeout(30)


def test_busiest_counts_a_sliding_window():
    assert busiest([], 1.0) == 0
    assert busiest([0.0, 0.5, 0.99, 1.0, 1.5], 1.0) == 3  # [0.5, 1.5): 0.5, 0.99, 1.0
    assert busiest([3.0, 0.0, 2.0, 1.0], 1.0) == 1


def test_messages_are_what_sends_edits_deletes_copies_or_forwards_in_a_chat():
    chat = {"chat_id": 5}
    assert all(is_message(m, chat) for m in ("sendMessage", "editMessageText", "deleteMessage", "copyMessage",
                                               "forwardMessage", "sendPhoto"))
    assert is_message("editMessageText", {"inline_message_id": "x"})
    assert not any(is_message(m, chat) for m in ("sendChatAction", "answerCallbackQuery", "getFile", "getChat"))
    assert not is_message("deleteMyCommands", {}) and not is_message("deleteWebhook", {})


def test_a_message_past_a_window_is_answered_429_with_the_seconds_until_it_has_room():
    limits = FloodLimits()
    assert all(limits.admit("sendMessage", {"chat_id": chat}, 100.0) is None for chat in range(1, 31))
    refused = limits.admit("sendMessage", {"chat_id": 31}, 100.5)
    assert refused.status == 429 and refused.retry_after == 1
    assert limits.admit("sendChatAction", {"chat_id": 31}, 100.5) is None  # not a message
    assert limits.admit("sendMessage", {"chat_id": 31}, 101.0) is None  # the first 30 are a second old

    private = FloodLimits()
    assert all(private.admit("sendMessage", {"chat_id": 7}, 10.0 + i / 2) is None for i in range(13))
    assert private.admit("editMessageText", {"chat_id": 7}, 17.0).retry_after == 3  # 13 since 10.0
    assert private.admit("sendMessage", {"chat_id": 8}, 17.0) is None  # another chat has room

    burst = FloodLimits()
    assert all(burst.admit("sendMessage", {"chat_id": 7}, 10.0 + i / 100) is None for i in range(3))
    assert burst.admit("sendPhoto", {"chat_id": 7}, 10.5).retry_after == 1  # 3 in the last second
    assert burst.admit("sendMessage", {"chat_id": 7}, 11.0) is None

    group = FloodLimits()
    assert all(group.admit("sendMessage", {"chat_id": -100}, float(i)) is None for i in range(20))
    assert group.admit("sendMessage", {"chat_id": -100}, 30.0).retry_after == 30
    assert group.admit("sendMessage", {"chat_id": -100}, 60.0) is None


async def test_the_mode_is_off_by_default_and_switched_over_the_test_api(botapi, botapi_bot):
    botapi_bot.inject_text(42, "/start")
    api, control = f"{botapi.base_url}{botapi_bot.token}", f"{botapi.url}/_emulator/bots/{botapi_bot.token}"
    async with aiohttp.ClientSession() as http:

        async def send_4() -> tuple[list[int], dict]:
            statuses = []
            for i in range(4):
                async with http.post(f"{api}/sendMessage", json={"chat_id": 42, "text": str(i)}) as response:
                    statuses.append(response.status)
                    body = await response.json()
            return statuses, body

        assert (await send_4())[0] == [200] * 4
        async with http.get(f"{control}/limits") as response:
            assert await response.json() == {"enforce": False}
        async with http.post(f"{control}/limits", json={"enforce": True}) as response:
            assert await response.json() == {"enforce": True}
        statuses, body = await send_4()
        assert statuses == [200] * 3 + [429]
        assert body["parameters"]["retry_after"] == 1 and body["description"].startswith("Too Many Requests")
        async with http.post(f"{control}/limits", json={"enforce": "yes"}) as response:
            assert response.status == 400
