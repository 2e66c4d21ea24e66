"""Queue a command's job: the use case behind a typed ``/command`` and the ⬆️ and ✏️ buttons.

Nothing is queued that the request already shows to be wrong: an unknown command, bad options,
no prompt, a picture of the wrong type or size (as far as the update states it), or none where
the command needs one. The options come from the text, over the user's defaults (/settings), over
the command's own (an admin's ``/settings /name``). A command with the model options (/img) is
img2img on a picture it is given (attached, replied to; the last result with ``--strength``), and
its graph is built now (``model_names.job_graph``): a model name that means no file, or several,
is refused here, and the job names the files it needs, so only a backend that has them claims it.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable

from telegram import Message, Update
from telegram.constants import FileSizeLimit

from ..core import imaging
from ..jobs.model_names import job_graph
from ..jobs.options import TARGETS, OptionError, command_options, plan
from ..jobs.submit import AtCap, Queued, QuotaSpent, Submission, submit
from ..jobs.workflow import requires_image
from ..store import access as access_store
from ..store import backends, commands, sessions
from . import access
from .context import CourierContext
from .options import choose, format_options, layered, option_message, split_options
from .parsing import MAX_PROMPT_CHARS, profile
from .refusals import BUSY, QUOTA

MAX_SEED = 2**32 - 1
"""The largest random seed a job gets (a typed ``--seed`` may be larger)."""


class Refusal(Exception):
    """A request turned down at the edge; the message is for the user, already in their language."""


def new_seed() -> int:
    return random.randint(0, MAX_SEED)


def image_file_id(message: Message | None, say: Callable[..., str], name: str, max_bytes: int) -> str | None:
    """The file id of the picture attached to ``message`` (a photo, or an image sent as a file).

    None when nothing is attached. The size and pixel count are checked as far as the update
    states them (a document's pixels are only known once its bytes are fetched).
    :raises Refusal: the attachment is not a picture, or is too large to use.
    """
    if message is None or not message.effective_attachment:
        return None
    width = height = None
    if message.photo:
        attachment = message.photo[-1]
        width, height = attachment.width, attachment.height
    elif message.document is not None and (message.document.mime_type or "").startswith("image/"):
        attachment = message.document
    else:
        raise Refusal(say("not_an_image", name=name))
    size = attachment.file_size or 0
    if size > max_bytes:
        raise Refusal(say("bad_image", reason=_reason(say, imaging.too_big(size, max_bytes))))
    if size > FileSizeLimit.FILESIZE_DOWNLOAD:
        raise Refusal(say("bad_image", reason=say("image_too_big_for_telegram",
                                                  limit_mb=FileSizeLimit.FILESIZE_DOWNLOAD / 1e6)))
    if width and height and (refusal := imaging.too_many_pixels(width, height)):
        raise Refusal(say("bad_image", reason=_reason(say, refusal)))
    return attachment.file_id


def _reason(say: Callable[..., str], bad: imaging.BadImage) -> str:
    return say(bad.key, **bad.params)


async def queue_command(update: Update, context: CourierContext, name: str, text: str,
                        image: str | None = None) -> bool:
    """Queue ``/name text`` (prompt and options) for the sender of ``update``; whether a job was queued
    (if not, the chat was told why). ``image``: the file id of the input picture, where the command
    takes one; else the picture the message carries or replies to, else the user's last result there."""
    try:
        jobs = await command_jobs(update, context, name, text, image)
    except Refusal as refusal:
        await update.effective_message.reply_text(str(refusal))
        return False
    queued = None
    for part, params in enumerate(jobs):  # one, or --n of them where the graph takes no batch
        queued = await queue_job(update, context, name, params, part)
        if queued is None:
            break
    return queued is not None


async def command_jobs(update: Update, context: CourierContext, name: str, text: str,
                       image: str | None) -> list[dict]:
    """The params of the jobs ``/name text`` asks for (``queue_command``); the command's row and the
    sender's defaults are read here, as the request is checked.
    :raises Refusal: it asks for nothing that can run."""
    command, defaults = await commands.get_command_for_user(context.pool, name, update.effective_user.id)
    if command is None or not command.enabled:
        raise Refusal(context.t(update, "unknown_command", name=name))
    needs_image = requires_image(command.workflow)
    say = functools.partial(context.t, update)
    spec = command_options(command.workflow)
    prompt, typed = split_options(text)
    try:
        chosen, used = choose(typed, layered(split_options(defaults)[1], split_options(command.defaults)[1]), spec)
        runs = plan(chosen, spec, new_seed())
    except OptionError as error:
        raise Refusal(option_message(error, say, name, spec)) from None
    if not prompt and not needs_image:
        raise Refusal(context.t(update, "missing_prompt", name=name))
    if len(text) > MAX_PROMPT_CHARS:
        raise Refusal(context.t(update, "prompt_too_long", length=len(text), limit=MAX_PROMPT_CHARS))
    if not (needs_image or spec.offers("strength")):
        image = None
    elif image is None:
        strength_typed = any(TARGETS.get(option) == "strength" for option, _ in typed)
        image = await input_image(update, context, name, needed=needs_image or strength_typed)
    workflow = command.workflow
    if spec.offers("model"):
        try:
            workflow = job_graph(workflow, chosen, await backends.model_choices(context.pool),
                                 picture=image is not None, exact_size=any(n == "size" for n, _ in used))
        except OptionError as error:
            raise Refusal(option_message(error, say, name, spec)) from None
    return [{"prompt": prompt, "seed": run.seed, "options": format_options(used), "inputs": run.inputs,
             "image_file_id": image, "workflow": workflow} for run in runs]  # runs as it was when queued


async def input_image(update: Update, context: CourierContext, name: str, *, needed: bool) -> str | None:
    """The file id of the picture the message carries or replies to, else (if ``needed``) of the
    user's last result in the chat. :raises Refusal: a bad picture, or none where one is ``needed``."""
    message, say = update.effective_message, functools.partial(context.t, update)
    max_bytes = int(context.settings.max_image_mb * 2**20)
    image = (image_file_id(message, say, name, max_bytes)
             or image_file_id(message.reply_to_message, say, name, max_bytes))
    if image is not None or not needed:
        return image
    session = await sessions.get_session(context.pool, message.chat_id, update.effective_user.id)
    image = next((o["file_id"] for o in reversed(session.last_outputs if session else [])
                  if o.get("kind") == "image"), None)
    if image is None:
        raise Refusal(context.t(update, "needs_image", name=name))
    return image


def asked_by(update: Update, context: CourierContext, part: int = 0) -> dict:
    """``submit``'s arguments that say who asks for a job, where, and under which cap: the sender of
    ``update`` (their profile for the user row), its chat, the message to reply to, and the update
    (``part``: which of the jobs it asks for), whose second delivery queues nothing."""
    message, user = update.effective_message, update.effective_user
    return {"user_id": user.id, "chat_id": message.chat_id, "profile": profile(user),
            "reply_to_message_id": message.message_id, "max_active": context.settings.max_jobs_per_user,
            "update": (context.bot.id, update.update_id, part)}


async def queue_job(update: Update, context: CourierContext, name: str, params: dict, part: int = 0) -> int | None:
    """Queue the job of command ``name`` with ``params`` in the sender's language, under their cap and
    quota, listed in the chat's queue message (in a task of its own, after a moment, so a job that
    starts at once needs none); its id, None if it was refused (the chat was told why)."""
    submission = await submit(context.pool, command=name, params={**params, "language": context.language(update)},
                              quota=access.quota_of(update, context), **asked_by(update, context, part))
    if not isinstance(submission, Queued):
        await tell_refused(update, context, submission)
        return None
    context.bot_data.queue_messages.refresh(context.bot, update.effective_message.chat_id)
    return submission.job_id


async def tell_refused(update: Update, context: CourierContext, submission: Submission) -> None:
    """Tell the sender why nothing was queued: at the cap, or with the quota spent, once for a burst of
    commands (``refusals``); a second delivery of an update gets no reply (its first had one)."""
    message, user, refusals = update.effective_message, update.effective_user, context.bot_data.refusals
    if isinstance(submission, AtCap) and refusals.due(BUSY, user.id):
        await message.reply_text(context.nt(update, "too_many_jobs", submission.active))
    elif isinstance(submission, QuotaSpent) and refusals.due(QUOTA, user.id):
        usage = await access_store.quota_usage(context.pool, user.id)
        await message.reply_text(access.quota_line(update, context, submission.spent, usage))
