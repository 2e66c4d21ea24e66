"""What ``/forget`` and the retention purge delete in PostgreSQL, and what they leave to delete elsewhere.

The rows go in one transaction. The files on the backends and the bot's messages cannot go with
them, so the deleted jobs become ``Leftovers``: which files (and ComfyUI history entries) on which
backend, which messages in which chat.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import asyncpg

from .db import Db, Queries, acquire

query = Queries(__name__)

INPUT_SUBFOLDER = "courier"
"""Where a job's input picture is uploaded on its backend (``input/courier/job-<id>.png``)."""
OUTPUT_SUBFOLDER = "courier"
"""Where the shipped workflows save (``filename_prefix: courier/<command>``); results recorded
before their subfolder was stored are looked for there."""


def input_filename(job_id: int) -> str:
    """The name a job's input picture is uploaded under, in ``INPUT_SUBFOLDER``."""
    return f"job-{job_id}.png"


@dataclasses.dataclass
class Leftovers:
    jobs: int = 0
    files: dict[str, list[dict]] = dataclasses.field(default_factory=dict)  # backend -> [{filename, subfolder, type}]
    prompt_ids: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # backend -> ComfyUI history ids
    messages: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (chat id, message id)

    def add(self, other: Leftovers) -> None:
        self.jobs += other.jobs
        for backend, files in other.files.items():
            self.files.setdefault(backend, []).extend(files)
        for backend, ids in other.prompt_ids.items():
            self.prompt_ids.setdefault(backend, []).extend(ids)
        self.messages.extend(other.messages)


def leftovers(rows: Iterable[asyncpg.Record]) -> Leftovers:
    """The files, history entries and messages of deleted jobs (``forget_user_jobs`` rows)."""
    left = Leftovers()
    for row in rows:
        left.jobs += 1
        result = row["result"] if isinstance(row["result"], dict) else {}
        outputs = [o for o in result.get("outputs") or [] if isinstance(o, dict)]
        if row["status_message_id"] is not None:
            left.messages.append((row["chat_id"], row["status_message_id"]))
        left.messages.extend((row["chat_id"], m) for o in outputs for m in o.get("message_ids") or [])
        if row["backend"] is None:  # never claimed: nothing reached a backend
            continue
        files = left.files.setdefault(row["backend"], [])
        if row["had_input"]:
            files.append({"filename": input_filename(row["id"]), "subfolder": INPUT_SUBFOLDER, "type": "input"})
        files.extend({"filename": o["filename"], "subfolder": o.get("subfolder", OUTPUT_SUBFOLDER),
                      "type": o.get("type", "output")} for o in outputs if o.get("filename"))
        if result.get("prompt_id"):
            left.prompt_ids.setdefault(row["backend"], []).append(result["prompt_id"])
    return left


async def forget_user(db: Db, user_id: int) -> Leftovers:
    """Delete the user's jobs, chat sessions, pending actions, default options, profile and the queue
    message of their private chat; keep their ban and quota counters.

    Cancel their active jobs first (their workers must stop writing to rows that are gone).
    """
    async with acquire(db) as conn, conn.transaction():
        rows = await conn.fetch(query("forget_user_jobs"), user_id)
        queue_messages = await conn.fetch(query("forget_queue_message"), user_id)
        await conn.execute(query("forget_user_rest"), user_id)
    left = leftovers(rows)
    left.messages.extend((row["chat_id"], row["message_id"]) for row in queue_messages)
    return left


async def purge_old(db: Db, days: int, limit: int) -> Leftovers:
    """Delete up to ``limit`` finished jobs older than ``days`` days, stale sessions, old counters."""
    async with acquire(db) as conn, conn.transaction():
        rows = await conn.fetch(query("purge_old_jobs"), days, limit)
        await conn.execute(query("purge_old_rest"), days)
    return leftovers(rows)
