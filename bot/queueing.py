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
from ..jobs.workflow import requires_image
from ..store import backends, commands, sessions
from . import access
from .context import CourierContext
from .options import choose, format_options, layered, option_message, split_options
from .parsing import MAX_PROMPT_CHARS

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
    message, user = update.effective_message, update.effective_user
    named = context.named_command
    command, defaults = (named[1:] if named is not None and named[0] == name
                         else await commands.get_command_for_user(context.pool, name, user.id))
    if command is None or not command.enabled:
        await message.reply_text(context.t(update, "unknown_command", name=name))
        return False
    needs_image = requires_image(command.workflow)
    say = functools.partial(context.t, update)
    spec = command_options(command.workflow)
    prompt, typed = split_options(text)
    try:
        chosen, used = choose(typed, layered(split_options(defaults)[1], split_options(command.defaults)[1]), spec)
        runs = plan(chosen, spec, new_seed())
    except OptionError as error:
        await message.reply_text(option_message(error, say, name, spec))
        return False
    strength_typed = any(TARGETS.get(option) == "strength" for option, _ in typed)
    if not prompt and not needs_image:
        await message.reply_text(context.t(update, "missing_prompt", name=name))
        return False
    if len(text) > MAX_PROMPT_CHARS:
        await message.reply_text(context.t(update, "prompt_too_long", length=len(text), limit=MAX_PROMPT_CHARS))
        return False
    if not (needs_image or spec.offers("strength")):
        image = None
    elif image is None:
        max_bytes = int(context.settings.max_image_mb * 2**20)
        try:
            image = (image_file_id(message, say, name, max_bytes)
                     or image_file_id(message.reply_to_message, say, name, max_bytes))
        except Refusal as refusal:
            await message.reply_text(str(refusal))
            return False
        if image is None and (needs_image or strength_typed):
            session = await sessions.get_session(context.pool, message.chat_id, user.id)
            image = next((o["file_id"] for o in reversed(session.last_outputs if session else [])
                          if o.get("kind") == "image"), None)
            if image is None:
                await message.reply_text(context.t(update, "needs_image", name=name))
                return False
    workflow = command.workflow
    if spec.offers("model"):
        try:
            workflow = job_graph(workflow, chosen, await backends.model_choices(context.pool),
                                 picture=image is not None, exact_size=any(n == "size" for n, _ in used))
        except OptionError as error:
            await message.reply_text(option_message(error, say, name, spec))
            return False
    queued = None
    for part, run in enumerate(runs):  # one, or --n of them where the graph takes no batch
        params = {"prompt": prompt, "seed": run.seed, "options": format_options(used), "inputs": run.inputs,
                  "image_file_id": image, "workflow": workflow}  # runs as it was when queued
        queued = await queue_job(update, context, name, params, part)
        if queued is None:
            break
    return queued is not None


async def queue_job(update: Update, context: CourierContext, name: str, params: dict, part: int = 0) -> int | None:
    """Queue the job of command ``name`` with ``params`` in the sender's language, under their cap and
    quota, listed in the chat's queue message; its id, None if it was refused (the chat was told why)."""
    return await context.submit_job(update, name, {**params, "language": context.language(update)},
                                    quota=access.quota_of(update, context), part=part)
