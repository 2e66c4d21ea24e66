"""The inline keyboards of results and ``/history``, and the callback data their buttons carry.

A button's callback data is ``r:<action>:<token>``: an action letter and the random token of a
job's buttons (``store.buttons``), well under Telegram's 64 bytes. It names no job and no user:
the token is looked up in PostgreSQL, and only the job's user may use it.
"""

from __future__ import annotations

from collections.abc import Callable

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, SwitchInlineQueryChosenChat

PREFIX = "r:"
SEED, UPSCALE, EDIT, INFO, DELETE, AGAIN, KEEP = "s", "u", "e", "i", "d", "a", "x"
"""The actions: new seed, upscale, edit, parameters, delete, run again (/history), cancel the edit."""
ACTIONS = frozenset((SEED, UPSCALE, EDIT, INFO, DELETE, AGAIN, KEEP))


def callback_data(action: str, token: str) -> str:
    return f"{PREFIX}{action}:{token}"


def parse(data: str | None) -> tuple[str, str] | None:
    """(action, token) of a button's callback data; None if it is not one of ours."""
    action, _, token = (data or "").removeprefix(PREFIX).partition(":")
    return (action, token) if (data or "").startswith(PREFIX) and action in ACTIONS and token else None


def button(action: str, token: str, label: str) -> InlineKeyboardButton:
    return InlineKeyboardButton(label, callback_data=callback_data(action, token))


def result_keyboard(token: str, say: Callable[..., str]) -> InlineKeyboardMarkup:
    """The buttons under a result: 🎲 ⬆️ ✏️, then ℹ️ 🗑 📤 (labels in the job's language, ``say``).

    📤 Share opens Telegram's chat picker, then inline mode there with the token as its query, which
    lists this result only (``bot.inline``): the same request that posts the buttons carries it.
    """
    return InlineKeyboardMarkup([
        [button(SEED, token, say("button_seed")), button(UPSCALE, token, say("button_upscale")),
         button(EDIT, token, say("button_edit"))],
        [button(INFO, token, say("button_info")), button(DELETE, token, say("button_delete")),
         InlineKeyboardButton(say("button_share"), switch_inline_query_chosen_chat=SwitchInlineQueryChosenChat(
             token, allow_user_chats=True, allow_bot_chats=True, allow_group_chats=True,
             allow_channel_chats=True))]])
