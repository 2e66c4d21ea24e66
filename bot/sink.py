"""The chat port of ``jobs/`` (``jobs.ports.ChatSink``) over python-telegram-bot's Bot.

Telegram's errors stop here: a file Telegram will not hand out becomes ``InputUnavailable``,
a send becomes ``DeliveryFailed`` or ``DeliveryUnconfirmed`` (``bot/sending.py``), a failed
download ``ChatError``.
"""

from __future__ import annotations

from collections.abc import Callable

from telegram import Bot, InlineKeyboardMarkup
from telegram.constants import FileSizeLimit
from telegram.error import BadRequest, TelegramError

from ..jobs.ports import ChatError, DeliveryFailed, InputUnavailable, ResultExtras, SentFn
from .delivery import deliver_album, deliver_file, reply_args
from .job_messages import JobMessages
from .keyboards import result_keyboard
from .limiter import STATUS
from .progress import ProgressMessage
from .sending import send


class TelegramSink:
    """One per bot; its jobs' status messages are ``JobMessages``'."""

    def __init__(self, bot: Bot, progress_interval_s: float, queue_messages):
        self.bot = bot
        self.messages = JobMessages(bot, progress_interval_s, queue_messages)  # BotData.queue_messages

    async def send_text(self, chat_id: int, text: str, reply_to: int | None = None,
                        extras: ResultExtras | None = None) -> int:
        markup = {"reply_markup": _keyboard(extras)} if extras is not None else {}
        sent = await send(lambda: self.bot.send_message(chat_id, text, **markup, **reply_args(reply_to)), "message")
        return sent.message_id

    async def check_chat(self, chat_id: int) -> None:
        try:
            await self.bot.get_chat(chat_id)
        except TelegramError as exc:
            raise DeliveryFailed(str(exc)) from exc

    def status(self, job_id: int, chat_id: int, message_id: int | None, *, reply_to: int | None,
               worker: str) -> ProgressMessage:
        return self.messages.status(job_id, chat_id, message_id, reply_to=reply_to, worker=worker)

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        await delete_message(self.bot, chat_id, message_id)

    async def send_result(self, chat_id: int, reply_to: int | None, filename: str, data: bytes,
                          extras: ResultExtras | None = None, sent: SentFn | None = None) -> dict:
        if extras is None:
            return await deliver_file(self.bot, chat_id, reply_to, filename, data, sent=sent)
        return await deliver_file(self.bot, chat_id, reply_to, filename, data, extras.caption, _keyboard(extras),
                                  sent=sent)

    async def send_album(self, chat_id: int, reply_to: int | None, files: list[tuple[str, bytes]],
                         sent: SentFn | None = None) -> list[dict]:
        return await deliver_album(self.bot, chat_id, reply_to, files, sent)

    async def offer_buttons(self, chat_id: int, message_id: int, token: str, say: Callable[..., str]) -> None:
        await send(lambda: self.bot.edit_message_reply_markup(chat_id, message_id,
                                                              reply_markup=result_keyboard(token, say)), "buttons")

    async def send_file(self, chat_id: int, reply_to: int | None, filename: str, data: bytes) -> dict:
        sent = await send(lambda: self.bot.send_document(chat_id, document=data, filename=filename,
                                                         disable_content_type_detection=True, **reply_args(reply_to)),
                          f"document {filename}")
        return {"message_id": sent.message_id}

    async def fetch_file(self, file_id: str) -> bytes:
        try:
            telegram_file = await self.bot.get_file(file_id)
            return bytes(await telegram_file.download_as_bytearray())
        except BadRequest as exc:  # a retry cannot help: too big, or gone
            if "too big" in exc.message.lower():
                raise InputUnavailable("image_too_big_for_telegram",
                                       limit_mb=FileSizeLimit.FILESIZE_DOWNLOAD / 1e6) from exc
            raise InputUnavailable("image_unavailable") from exc
        except TelegramError as exc:
            raise ChatError(str(exc)) from exc


def _keyboard(extras: ResultExtras) -> InlineKeyboardMarkup:
    return result_keyboard(extras.token, extras.say)


async def delete_message(bot: Bot, chat_id: int, message_id: int) -> None:
    """Delete a status message the bot sent (it gives way to results). :raises DeliveryFailed:"""
    try:
        await bot.delete_message(chat_id, message_id, rate_limit_args=STATUS)
    except TelegramError as exc:
        raise DeliveryFailed(str(exc)) from exc
