"""How a job's run ended, as a value: what the dispatcher records, and what the chat is told.

``classify`` reads the exception a run ended with (None: it returned) and gives one ``Outcome``;
the dispatcher records it once and tells the chat once (``Dispatcher._conclude``):

===========  ===================================  ==========================================
kind         raised by                            recorded / told
===========  ===================================  ==========================================
done         (the runner returned)                succeeded / "Done" (the caption may say it)
failed       ComfyError, JobError, anything else  failed / "failed: <text>" (an incident id
             (an incident, logged with its id)    for anything unexpected)
timeout      the job's time limit                 its prompt cancelled; failed / "failed"
down         BackendUnavailable                   the backend marked down; then as lost
lost         PromptLost                           queued again (the attempt counts) / "retrying"
                                                  said first; failed once out of attempts
requeued     (a lost run, queued again)           (recorded and told already)
not_ours     NotRunning, the lease lost           its prompt cancelled / "cancelled" if it was
cancelled    /cancel (it marked the job)          nothing more / "cancelled"
blocked      ChatBlocked                          failed, the user's other jobs cancelled / nothing
===========  ===================================  ==========================================
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import Callable

from ..core import i18n
from ..core.logs import get_logger
from ..store.deliveries import NotRunning
from .errors import BackendUnavailable, ComfyError, PromptLost, describe_error
from .ports import ChatBlocked
from .runner import JobError

log = get_logger("dispatcher")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """``kind`` (the table above); ``text``: the reason recorded and shown (None: none of its own);
    ``counts_attempt``: the run counts against the job's ``max_attempts`` if it runs again."""

    kind: str
    text: str | None = None
    counts_attempt: bool = False


DONE = Outcome("done")
CANCELLED = Outcome("cancelled")
NOT_OURS = Outcome("not_ours")
REQUEUED = Outcome("requeued")
"""A lost run queued again (``Dispatcher._backend_failed``): recorded and told already."""


def classify(exc: BaseException, *, job_id: int, backend: str, language: str, say: Callable[..., str],
             timeout_s: float) -> Outcome:
    """The outcome of a run of job ``job_id`` on ``backend`` (as logs show it) that raised ``exc``;
    its user reads ``language`` (``say``)."""
    if isinstance(exc, asyncio.TimeoutError):
        return Outcome("timeout", say("timeout", seconds=timeout_s))
    if isinstance(exc, BackendUnavailable):
        return Outcome("down", str(exc), counts_attempt=True)
    if isinstance(exc, PromptLost):
        return Outcome("lost", str(exc), counts_attempt=True)
    if isinstance(exc, ComfyError):
        log.warning("job %s failed on %s: %s", job_id, backend, exc.detail)
        return Outcome("failed", describe_error(exc, i18n.catalog(language)))
    if isinstance(exc, JobError):
        return Outcome("failed", str(exc))
    if isinstance(exc, NotRunning):
        return NOT_OURS
    if isinstance(exc, ChatBlocked):
        return Outcome("blocked", "the user blocked the bot")
    incident = secrets.token_hex(4)
    log.error("incident %s: job %s failed unexpectedly", incident, job_id, exc_info=exc)
    return Outcome("failed", say("internal_error_incident", incident=incident))
