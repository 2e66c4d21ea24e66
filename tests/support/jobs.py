"""Queue a job the short way: the production ``jobs.submit`` without cap, quota or update record.

Like every submit, it sets the user's ``profile`` (username, first name, language; None clears them)."""

from __future__ import annotations

from typing import Any, NamedTuple

from comfyui_courier.store import jobs


class Enqueued(NamedTuple):
    job_id: int
    position: int


async def enqueue(db, *, user_id: int, chat_id: int, command: str, params: dict[str, Any],
                  max_attempts: int = 3, reply_to_message_id: int | None = None,
                  profile: tuple = (None, None, None)) -> Enqueued:
    submitted = await jobs.submit(db, user_id=user_id, chat_id=chat_id, command=command, params=params,
                                  max_attempts=max_attempts, reply_to_message_id=reply_to_message_id,
                                  profile=profile)
    return Enqueued(submitted.job_id, await jobs.queue_position(db, submitted.job_id))
