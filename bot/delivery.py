"""Send a job's results to the chat: each lossless file, and what a Telegram client shows best.

A still image goes as a document (its bytes kept) and a photo preview, which carries the job's
caption and buttons; several at once as two albums, the documents and then their photos. A video
goes as a streamable video and its file as a document; a GIF as an animation. Previews and a
video's document are best effort, and go only once the file itself is kept as sent (``sent``): a
host that dies while they are on their way leaves the file known, never sent again.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from telegram import Bot, InlineKeyboardMarkup, InputMediaDocument, InputMediaPhoto, Message
from telegram.constants import FileSizeLimit

from ..core.imaging import ANIMATION_SUFFIXES, VIDEO_SUFFIXES
from ..core.logs import get_logger
from ..jobs.ports import ChatError, SentFn
from .sending import send

log = get_logger("delivery")

PREVIEW_MAX_BYTES = FileSizeLimit.PHOTOSIZE_UPLOAD  # sendPhoto's limit: 10 MB


async def deliver_file(bot: Bot, chat_id: int, reply_to: int | None, filename: str, data: bytes,
                       caption: str | None = None, markup: InlineKeyboardMarkup | None = None,
                       sent: SentFn | None = None) -> dict:
    """Send one result; returns the session record used for chaining (and ``message_ids``, for /forget).

    ``caption`` and ``markup`` (the result buttons) ride on the message a client shows best: the
    photo preview, else the document, the video, the animation; ``"buttons"`` in the record names
    that message (absent when it went without them: a preview that failed).

    :raises UploadTooLarge, DeliveryFailed, DeliveryUnconfirmed: of the file; the extras are best effort.
    """
    suffix = os.path.splitext(filename)[1].lower()
    reply = reply_args(reply_to)
    extras = {"caption": caption, "reply_markup": markup}
    if suffix in VIDEO_SUFFIXES:
        video = await send(lambda: bot.send_video(chat_id, video=data, filename=filename, supports_streaming=True,
                                                  **extras, **reply), f"video {filename}")
        message_ids = [video.message_id]
        record = {"kind": "video", "file_id": video.video.file_id, "filename": filename, "message_ids": message_ids,
                  **_buttons(markup, video.message_id, caption)}
        await _kept(sent, record)
        await _also(message_ids, lambda: _document(bot, chat_id, video.message_id, filename, data),
                    f"file of video {filename}")
        return record
    if suffix in ANIMATION_SUFFIXES:
        animation = await send(lambda: bot.send_animation(chat_id, animation=data, filename=filename, **extras,
                                                          **reply), f"animation {filename}")
        return {"kind": "video", "file_id": animation.animation.file_id, "filename": filename,
                "message_ids": [animation.message_id], **_buttons(markup, animation.message_id, caption)}
    previewed = len(data) <= PREVIEW_MAX_BYTES  # e.g. extreme aspect ratios fail: the lossless file is there
    document = await send(lambda: _document(bot, chat_id, reply_to, filename, data, **({} if previewed else extras)),
                          f"document {filename}")
    message_ids = [document.message_id]
    record = _image_record(document, filename, message_ids)
    if not previewed:
        return {**record, **_buttons(markup, document.message_id, caption)}
    await _kept(sent, record)
    if await _also(message_ids, lambda: bot.send_photo(chat_id, photo=data, filename=filename, **extras,
                                                       **reply_args(document.message_id)), f"preview {filename}"):
        record.update(_buttons(markup, message_ids[-1], caption))
    return record


def _buttons(markup: InlineKeyboardMarkup | None, message_id: int, caption: str | None) -> dict:
    """The record's note of the message that carries the buttons (and whether the caption too)."""
    return {"buttons": message_id, "captioned": caption is not None} if markup is not None else {}


async def deliver_album(bot: Bot, chat_id: int, reply_to: int | None, files: list[tuple[str, bytes]],
                        sent: SentFn | None = None) -> list[dict]:
    """Send 2-10 still images: their documents as one album, then their photos as another.

    :raises UploadTooLarge, DeliveryFailed, DeliveryUnconfirmed: of the documents; the photos are best effort.
    """
    documents = await send(lambda: bot.send_media_group(
        chat_id, [InputMediaDocument(data, filename=name, disable_content_type_detection=True)
                  for name, data in files], **reply_args(reply_to)), f"album of {len(files)} files")
    records = [_image_record(message, name, [message.message_id])
               for message, (name, _) in zip(documents, files, strict=True)]
    await _kept(sent, *records)
    shown = [(record, name, data) for record, (name, data) in zip(records, files, strict=True)
             if len(data) <= PREVIEW_MAX_BYTES]
    if len(shown) == 1:
        record, name, data = shown[0]
        await _also(record["message_ids"], lambda: bot.send_photo(
            chat_id, photo=data, filename=name, **reply_args(documents[0].message_id)), f"preview {name}")
    elif shown:
        try:
            photos = await send(lambda: bot.send_media_group(
                chat_id, [InputMediaPhoto(data, filename=name) for _, name, data in shown],
                **reply_args(documents[0].message_id)), f"album of {len(shown)} previews")
        except ChatError as exc:
            log.info("previews of an album skipped: %s", exc)
        else:
            # best effort, like the previews themselves: a short answer leaves the rest without a photo id
            for (record, _, _), photo in zip(shown, photos, strict=False):
                record["message_ids"].append(photo.message_id)
    return records


async def _kept(sent: SentFn | None, *records: dict) -> None:
    """Have the files' records kept before their extras go (a copy: the extras add to the records)."""
    if sent is not None:
        await sent([{**record, "message_ids": list(record["message_ids"])} for record in records])


def _document(bot: Bot, chat_id: int, reply_to: int | None, filename: str, data: bytes,
              **extras) -> Awaitable[Message]:
    return bot.send_document(chat_id, document=data, filename=filename, disable_content_type_detection=True,
                             **extras, **reply_args(reply_to))


def _image_record(document: Message, filename: str, message_ids: list[int]) -> dict:
    return {"kind": "image", "file_id": document.document.file_id, "filename": filename, "message_ids": message_ids}


async def _also(message_ids: list[int], call: Callable[[], Awaitable[Message]], what: str) -> bool:
    """Send a best-effort extra; its message joins ``message_ids`` when it goes (then True)."""
    try:
        message_ids.append((await send(call, what)).message_id)
    except ChatError as exc:
        log.info("%s skipped: %s", what, exc)
        return False
    return True


def reply_args(reply_to: int | None) -> dict:
    return {"reply_to_message_id": reply_to, "allow_sending_without_reply": True}
