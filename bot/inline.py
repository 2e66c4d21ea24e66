"""Inline mode: ``@bot words`` in any chat lists the user's own results, and choosing one posts it there.

The results are the files Telegram already keeps (``InlineQueryResultCached*`` by the ``file_id``
each delivery recorded): nothing is uploaded and no backend is asked, so the bot's host takes no
part in what the chat then shows. The answer is personal (``is_personal``: Telegram caches it per
user only) and paged with ``next_offset``. A stranger's or a banned user's query is answered by the
gatekeeper with no results and a button to the bot's private chat (``refuse``), before any of this.

The query is the user's to type, up to 256 characters: it is cleaned (``clean_text``: no NUL), cut
to ``MAX_WORDS`` words of ``MAX_WORD_CHARS``, and an offset we did not give (not a number, or
past ``MAX_OFFSET``) starts from the top. Telegram takes an answer for a few seconds only: a query
that waited longer (the bot was down or busy) is refused as "too old", which is noted, not an
incident (the user has moved on).
"""

from __future__ import annotations

import os
import re

from telegram import (
    InlineQuery,
    InlineQueryResultCachedDocument,
    InlineQueryResultCachedGif,
    InlineQueryResultCachedVideo,
    InlineQueryResultsButton,
    Update,
)
from telegram.error import BadRequest

from ..core.imaging import ANIMATION_SUFFIXES
from ..core.logs import get_logger
from ..store import inline
from .context import CourierContext
from .parsing import clean_text, echo

PAGE = 20
"""Results per answer (Telegram takes up to 50)."""
CACHE_S = 10
"""How long Telegram may show an answer again without asking: short, so a new result or a /forget shows soon."""
MAX_WORDS = 8
MAX_WORD_CHARS = 64
MAX_OFFSET = 10_000
TITLE_CHARS = 64
START_PARAMETER = "inline"
"""What the refusal's button opens the private chat with (``/start inline``)."""
_OFFSET = re.compile(r"[0-9]{1,6}")
EXPIRED = "query is too old"
"""What Telegram answers to an answer that came too late (or to a query id it never gave)."""

log = get_logger("inline")


def words_of(query: str) -> list[str]:
    """The words to look for in ``query``, cleaned and bounded."""
    return [word[:MAX_WORD_CHARS] for word in (clean_text(query) or "").split()[:MAX_WORDS]]


def offset_of(offset: str) -> int:
    """Where a page starts: the ``next_offset`` we gave, else 0."""
    return int(offset) if _OFFSET.fullmatch(offset or "") and int(offset) <= MAX_OFFSET else 0


def shown(result: inline.Result):
    """The cached result Telegram posts for one file: its lossless document, its video or its GIF."""
    output, result_id = result.output, f"{result.job_id}-{result.position}"
    title = echo(f"/{result.command} {result.prompt}".strip(), TITLE_CHARS)
    suffix = os.path.splitext(str(output.get("filename", "")))[1].lower()
    if output.get("kind") != "video":
        return InlineQueryResultCachedDocument(result_id, title, output["file_id"], description=output.get("filename"))
    if suffix in ANIMATION_SUFFIXES:
        return InlineQueryResultCachedGif(result_id, output["file_id"], title=title)
    return InlineQueryResultCachedVideo(result_id, output["file_id"], title)


async def answer(update: Update, context: CourierContext) -> None:
    """An allowed user's inline query: a page of their results matching its words, newest first."""
    query = update.inline_query
    start = offset_of(query.offset)
    found = await inline.search(context.pool, update.effective_user.id, words_of(query.query), PAGE + 1, start)
    more = len(found) > PAGE
    await _answer(query, [shown(result) for result in found[:PAGE]], cache_time=CACHE_S, is_personal=True,
                  next_offset=str(start + PAGE) if more else "")


async def refuse(update: Update, context: CourierContext) -> None:
    """A refused user's inline query: no results, and a button to the bot's private chat (which says why)."""
    await _answer(update.inline_query, [], cache_time=0, is_personal=True, button=InlineQueryResultsButton(
        context.t(update, "inline_start"), start_parameter=START_PARAMETER))


async def _answer(query: InlineQuery, results: list, **options) -> None:
    try:
        await query.answer(results, **options)
    except BadRequest as exc:
        if EXPIRED not in exc.message.lower():
            raise
        log.info("inline query %s expired before its answer", query.id)
