"""Send a job's results to the chat: lossless file first, then a photo preview."""

from __future__ import annotations

import os

from telegram import Bot

from ..jobs.ports import ChatError
from ..logs import get_logger
from .sending import send

log = get_logger("delivery")

PREVIEW_MAX_BYTES = 10 * 2**20  # sendPhoto's limit
VIDEO_SUFFIXES = (".mp4", ".webm", ".mov", ".mkv")
ANIMATION_SUFFIXES = (".gif",)


async def deliver_file(bot: Bot, chat_id: int, reply_to: int | None, filename: str, data: bytes) -> dict:
    """Send one result; returns the session record used for chaining (and ``message_ids``, for /forget).

    :raises DeliveryFailed, DeliveryUnconfirmed: of the file; the preview is best effort.
    """
    suffix = os.path.splitext(filename)[1].lower()
    reply = {"reply_to_message_id": reply_to, "allow_sending_without_reply": True}
    if suffix in VIDEO_SUFFIXES:
        sent = await send(lambda: bot.send_video(chat_id, video=data, filename=filename, supports_streaming=True,
                                                 **reply), f"video {filename}")
        return {"kind": "video", "file_id": sent.video.file_id, "filename": filename,
                "message_ids": [sent.message_id]}
    if suffix in ANIMATION_SUFFIXES:
        sent = await send(lambda: bot.send_animation(chat_id, animation=data, filename=filename, **reply),
                          f"animation {filename}")
        return {"kind": "video", "file_id": sent.animation.file_id, "filename": filename,
                "message_ids": [sent.message_id]}
    document = await send(lambda: bot.send_document(chat_id, document=data, filename=filename,
                                                    disable_content_type_detection=True, **reply),
                          f"document {filename}")
    message_ids = [document.message_id]
    if len(data) <= PREVIEW_MAX_BYTES:
        try:
            preview = await send(lambda: bot.send_photo(chat_id, photo=data, filename=filename,
                                                        reply_to_message_id=document.message_id,
                                                        allow_sending_without_reply=True), f"preview {filename}")
            message_ids.append(preview.message_id)
        except ChatError as exc:  # e.g. extreme aspect ratios, or Telegram down: the lossless file is there
            log.info("preview for %s skipped: %s", filename, exc)
    return {"kind": "image", "file_id": document.document.file_id, "filename": filename, "message_ids": message_ids}
