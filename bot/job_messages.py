"""A job's chat messages, owned here: the chat's queue message hands over to the job's status message,
which gives way to its results (their caption says "Done" when no status message is left to say it).

``jobs/`` asks for a job's status by the job alone (``ChatSink.status``: job id, chat, reply-to,
worker) and hands nothing up; this module wires it to PostgreSQL (its own calls to ``store.jobs``)
and to the chat's queue message (``queue_message.QueueMessages``). The display itself (throttle,
moment, previews, retries of the final text) is ``progress.ProgressMessage``.

The hand-over, as PostgreSQL decides it (``courier_queue_messages`` per chat; the job's
``status_message_id``; ``courier_take_status_v1``), so that each message has one owner at a time:

=================  ==============================  =============================================
message state      owner (who may send or edit it) leaves the state when
=================  ==============================  =============================================
queue: none        nobody                          a job is queued: a host holds the chat's row
                                                   and posts "Queued …" (``hold``, then ``settle``)
queue: held        the host updating it (one       its burst of updates ends: ``settle`` (shown)
                   statement per update, renewed   or ``drop`` (none: not posted, refused,
                   while the chat's queue moves)   deleted, turned into the "cancelled" text)
queue: shown       nobody (the row, not busy)      the queue moves: held again; or a job whose
                                                   chat has no queued job left takes it (below)
queue → status     the job's worker                ``courier_take_status_v1`` 'edit': the row is
                                                   deleted, the message is the job's status
status: none yet   the job's worker                its first text, a moment after it starts:
                                                   take → 'edit' (own or queue message), 'wait'
                                                   (queue held: ask again), 'post' (then adopt),
                                                   'none' (not this worker's: show nothing)
status: text       the job's worker                a live preview: a photo replaces it (moved)
status: photo      the job's worker                the final text: a text replaces it (moved)
results follow     the job's worker                nothing not shown yet is posted; the final
                                                   "Done" goes only into a status message the job
                                                   has or takes over, else the caption says it
=================  ==============================  =============================================

A host edits the chat's queue message only while it holds its row, and a job takes it over only
while nobody holds it and the chat has no queued job: the queue never edits a message a job took.
A job that posted a status of its own brings a queue message in its chat up to date once that is
recorded: one posted for it meanwhile (its round read the queue before the claim) is deleted, not
kept for a job that would take it over.
Making a job's status sends nothing; its first word (``started``) tells the chat's queue message
that the job left the queue.
"""

from __future__ import annotations

import functools

from telegram import Bot

from ..store import jobs
from .progress import MOMENT_S, ChatThrottle, ProgressMessage


class JobMessages:
    """One per bot: the status messages of its jobs, sharing one per-chat edit throttle, and the
    chats' queue messages (``queue_messages``: ``BotData.queue_messages``)."""

    def __init__(self, bot: Bot, progress_interval_s: float, queue_messages):
        self.bot = bot
        self.throttle = ChatThrottle(progress_interval_s)
        self.queue_messages = queue_messages

    def status(self, job_id: int, chat_id: int, message_id: int | None, *, reply_to: int | None,
               worker: str) -> ProgressMessage:
        """The status message of job ``job_id``, run by ``worker``, in ``chat_id`` (``message_id``:
        the one it has from an earlier run, else None). Sends nothing yet."""
        pool = self.queue_messages.store.pool
        return ProgressMessage(
            self.bot, chat_id, message_id, self.throttle, reply_to=reply_to,
            take=functools.partial(jobs.take_status_message, pool, job_id, worker),
            adopt=functools.partial(self._adopt, job_id, chat_id),
            moved=functools.partial(jobs.move_status_message, pool, job_id),
            started=functools.partial(self.queue_messages.refresh, self.bot, chat_id),
            after_s=min(MOMENT_S, self.throttle.interval_s))

    async def _adopt(self, job_id: int, chat_id: int, message_id: int) -> int | None:
        """Record the status the job posted of its own; a queue message in its chat is brought up to
        date, since it may list the job (its round read the queue before the job was claimed) and
        would otherwise stay, kept for a job that takes it over, which this one will not."""
        adopted = await jobs.adopt_status_message(self.queue_messages.store.pool, job_id, message_id)
        if adopted.queue_message:
            self.queue_messages.refresh(self.bot, chat_id)
        return adopted.message_id
