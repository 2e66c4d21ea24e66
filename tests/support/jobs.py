"""Queue a job the short way: the production ``jobs.submit`` without cap, quota or update record.

Like every submit, it sets the user's ``profile`` (username, first name, language; None clears them)."""

from __future__ import annotations

import json
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


async def seed_runs(db, command: str, seconds: float, count: int, *, ended_ago_s: float = 3600.0,
                    user_id: int = 1, execution_s: float | None = None) -> None:
    """``count`` succeeded runs of ``command`` of ``seconds`` each (claim to end; ``execution_s``: of
    that, ComfyUI's execution, in the result as the runner records it), the last ending ``ended_ago_s``
    ago, one a minute before it: a command's history, as its recent jobs leave it."""
    result = None if execution_s is None else {"execution_ms": round(execution_s * 1000)}
    async with db.acquire() as conn:
        await conn.execute("INSERT INTO courier_users (user_id) VALUES ($1) ON CONFLICT DO NOTHING", user_id)
        await conn.execute(
            "INSERT INTO courier_jobs (user_id, chat_id, command, status, started_at, finished_at, result)"
            " SELECT $1, $1, $2, 'succeeded', ended - make_interval(secs => $3), ended, $6::text::jsonb"
            " FROM (SELECT now() - make_interval(secs => $4 + 60 * n) AS ended FROM generate_series(0, $5 - 1) n) runs",
            user_id, command, float(seconds), float(ended_ago_s), count, None if result is None else json.dumps(result))
