"""Bot API methods about the bot and its chats: getMe, getChat, sendChatAction, and the command
menu (setMyCommands, getMyCommands, deleteMyCommands, by scope and language)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ..calls import Call, Verbs
from ..wire import bad_request

if TYPE_CHECKING:
    from ..bot import EmulatedBot

verbs = Verbs()
CHAT_ACTIONS = frozenset({
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice", "upload_document",
    "choose_sticker", "find_location", "record_video_note", "upload_video_note",
})


@verbs("getMe")
async def _get_me(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return bot.user


@verbs("getChat")
async def _get_chat(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    """A ChatFullInfo of a chat the bot knows (it sends nothing, so a blocked bot may still ask)."""
    chat = bot.known_chat(call.params)
    gifts = chat["type"] == "private"
    return {**chat, "accent_color_id": abs(chat["id"]) % 7, "max_reaction_count": 11,
            "accepted_gift_types": {"unlimited_gifts": gifts, "limited_gifts": gifts, "unique_gifts": gifts,
                                    "premium_subscription": gifts, "gifts_from_channels": gifts}}


@verbs("sendChatAction", outbound=True)
async def _send_chat_action(bot: EmulatedBot, call: Call) -> bool:
    bot.chat(call.params)
    if call.params.get("action") not in CHAT_ACTIONS:
        raise bad_request("wrong parameter action in request")
    return True


def _commands_key(params: dict[str, Any]) -> tuple[str, str]:
    scope = params.get("scope") or {"type": "default"}
    if not isinstance(scope, dict) or not isinstance(scope.get("type"), str):
        raise bad_request("can't parse BotCommandScope JSON object")
    return json.dumps(scope, sort_keys=True), str(params.get("language_code", ""))


@verbs("setMyCommands")
async def _set_my_commands(bot: EmulatedBot, call: Call) -> bool:
    commands = call.params.get("commands")
    if commands is None:
        raise bad_request('parameter "commands" is required')
    if not isinstance(commands, list):
        raise bad_request("can't parse commands JSON object")
    for command in commands:
        if not isinstance(command, dict):
            raise bad_request("can't parse BotCommand: expected an Object")
        if not re.fullmatch(r"[a-z0-9_]{1,32}", str(command.get("command", ""))):
            raise bad_request("BOT_COMMAND_INVALID")
        if not 1 <= len(str(command.get("description", "")).strip()) <= 256:
            raise bad_request("BOT_COMMAND_DESCRIPTION_INVALID")
    key = _commands_key(call.params)
    if commands:
        bot.commands[key] = [{"command": c["command"], "description": c["description"]} for c in commands]
    else:
        bot.commands.pop(key, None)
    return True


@verbs("getMyCommands")
async def _get_my_commands(bot: EmulatedBot, call: Call) -> list[dict[str, str]]:
    return bot.commands.get(_commands_key(call.params), [])


@verbs("deleteMyCommands")
async def _delete_my_commands(bot: EmulatedBot, call: Call) -> bool:
    bot.commands.pop(_commands_key(call.params), None)
    return True
