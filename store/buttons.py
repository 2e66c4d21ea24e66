"""Buttons under results: the token a job's buttons carry, presses that queue once, the pending edit.

A button's callback data holds an action and a random token; the token is looked up here, so
neither the job nor its user is ever taken from the data itself. ``press`` records the first
press of a queueing action under a token in one statement, so two presses processed at the
same time still queue one job. The "send the instruction" step of an edit is a pending action
(``courier_pending_actions``, one per user and chat): it outlives a restart, and expires.
"""

from __future__ import annotations

import secrets

from .access import PendingAction
from .db import Db, Queries, acquire
from .jobs import Job
from .privacy import Leftovers, leftovers

query = Queries(__name__)


def new_token() -> str:
    return secrets.token_urlsafe(12)


async def issue(db: Db, job_id: int) -> str:
    """The token of the job's buttons (made on first use; the same for every later call)."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("issue_buttons"), new_token(), job_id)


async def job_of(db: Db, token: str) -> Job | None:
    """The job behind ``token``; None when there is none (deleted, forgotten, or never issued)."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("button_job"), token)
    return None if row is None else Job(**row)


async def press(db: Db, token: str, action: str) -> bool:
    """Whether this is the first press of ``action`` under ``token`` (then it is recorded)."""
    async with acquire(db) as conn:
        return bool(await conn.fetchval(query("press_button"), token, action))


async def unpress(db: Db, token: str, action: str) -> None:
    """Forget a press that queued nothing after all, so that it may come again."""
    async with acquire(db) as conn:
        await conn.execute(query("unpress_button"), token, action)


async def history(db: Db, user_id: int, chat_id: int, limit: int) -> list[Job]:
    """The user's last ``limit`` results in the chat (succeeded jobs of commands), newest first."""
    async with acquire(db) as conn:
        return [Job(**row) for row in await conn.fetch(query("user_history"), user_id, chat_id, limit)]


async def wait_for_edit(db: Db, *, user_id: int, chat_id: int, job_id: int, payload: dict,
                        valid_s: float) -> str | None:
    """Wait ``valid_s`` seconds for the user's instruction to edit the job's result in this chat
    (replacing a wait for another result); returns its token, None if it waits for this one already."""
    async with acquire(db) as conn:
        return await conn.fetchval(*query.bind("put_pending_edit", token=new_token(), user_id=user_id, chat_id=chat_id,
                                               payload={**payload, "job_id": job_id}, job_id=job_id,
                                               valid_s=float(valid_s)))


async def take_edit(db: Db, *, user_id: int, chat_id: int) -> PendingAction | None:
    """The edit the user waits to instruct in this chat, removed; None if none is waiting (or it expired)."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("take_pending_edit"), user_id, chat_id)
    return None if row is None else PendingAction(**row)


async def delete_result(db: Db, job_id: int, user_id: int) -> Leftovers:
    """Delete the user's finished job and its outputs in their chat sessions; what is left elsewhere
    (files on its backend, the bot's messages) for the caller to delete. Nothing if it is gone."""
    async with acquire(db) as conn, conn.transaction():
        rows = await conn.fetch(query("delete_result"), job_id, user_id)
    return leftovers(rows)
