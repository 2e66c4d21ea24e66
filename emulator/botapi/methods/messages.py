"""Bot API methods on text messages: sendMessage (with a reply keyboard, the chat's from then on),
editMessageText, editMessageCaption, editMessageReplyMarkup, deleteMessage, and
answerCallbackQuery for a pressed inline button."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import keyboards
from ..calls import Call, Verbs
from ..params import read_caption, read_markup, read_text
from ..wire import bad_request

if TYPE_CHECKING:
    from ..bot import EmulatedBot

verbs = Verbs()


@verbs("sendMessage", outbound=True)
async def _send_message(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    params = call.params
    chat = bot.chat(params)
    content = read_text(params)
    markup = params.get("reply_markup")
    shown = isinstance(markup, dict) and ("keyboard" in markup or "remove_keyboard" in markup)
    keyboard = keyboards.check(markup, chat["type"]) if shown else None
    message = bot.post(chat, bot.sender, content, bot.reply_target(chat, params), read_markup(params))
    if shown:
        bot.keyboards[chat["id"]] = keyboard
    return message


@verbs("editMessageText", outbound=True)
async def _edit_message_text(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    message = bot.editable(call.params)
    if "text" not in message:
        raise bad_request("there is no text in the message to edit")
    return bot.edit(message, read_text(call.params), ("text", "entities"), read_markup(call.params))


@verbs("editMessageCaption", outbound=True)
async def _edit_message_caption(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    message = bot.editable(call.params)
    if "text" in message:
        raise bad_request("there is no caption in the message to edit")
    return bot.edit(message, read_caption(call.params), ("caption", "caption_entities"), read_markup(call.params))


@verbs("editMessageReplyMarkup", outbound=True)
async def _edit_message_reply_markup(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return bot.edit(bot.editable(call.params), {}, (), read_markup(call.params))


@verbs("deleteMessage", outbound=True)
async def _delete_message(bot: EmulatedBot, call: Call) -> bool:
    chat = bot.chat(call.params)
    message_id = call.params.get("message_id")
    if not isinstance(message_id, int):
        raise bad_request("message identifier is not specified")
    if bot.messages.pop((chat["id"], message_id), None) is None:
        raise bad_request("message to delete not found")
    return True


@verbs("answerCallbackQuery", outbound=True)
async def _answer_callback_query(bot: EmulatedBot, call: Call) -> bool:
    if bot.callback_queries.pop(str(call.params.get("callback_query_id", "")), None) is None:
        raise bad_request("query is too old and response timeout expired or query ID is invalid")
    return True
