"""The buttons under each result and ``/history``'s, and the ✏️ edit's wait for its instruction.

Every press is answered (ℹ️ sends its message once per result every ``INFO_EVERY_S``). A button's
token is looked up in PostgreSQL (``store.buttons``), and only the user who started the job may use
it: anyone else, in a group say, gets an alert and nothing happens. A button that queues a job (🎲
new seed, ⬆️ upscale, 🔁 run again) does so on its first press only. ✏️ edit waits (in PostgreSQL, so
across a restart, for ``EDIT_VALID_S``) for the user's next text in that chat, and runs
``COURIER_EDIT_COMMAND`` (``/qwen``) with it on the result; ``/cancel`` or the prompt's button stops
the wait. Where that command's model files are missing on every backend taking jobs (as their
health checks recorded them), it runs ``FALLBACK_EDIT_COMMAND`` instead (``/img`` on the picture:
img2img with the default model and strength) and says so; not where no backend has a checkpoint
for it either (the edit command's own reply then says which files to download).
"""

from __future__ import annotations

import functools
import html
import time
from collections.abc import Awaitable, Callable, Collection

from telegram import InlineKeyboardMarkup, Update
from telegram.constants import ParseMode

from ..jobs.model_names import CHECKPOINTS
from ..jobs.readiness import ModelFile, known_models, missing_everywhere, needed_files
from ..store import access, backends, buttons, commands
from ..store.jobs import Job
from . import forget, keyboards, queueing
from .context import CourierContext
from .options import format_options, split_options

UPSCALE_COMMAND = "upscale"
FALLBACK_EDIT_COMMAND = "img"
EDIT_VALID_S = 600
INFO_EVERY_S = 10.0
HISTORY_LENGTH = 10
HISTORY_LINE_CHARS = 200  # of each result's command line in /history: ten of them fit in one message
AGAIN_PER_ROW = 5


def options_of(job: Job) -> list[tuple[str, str]]:
    """The options that made the job's result, but its seed (a 🎲 job's differs from the typed one) and
    the ``--n`` that made it one of several jobs (a batch's ``--n`` stays)."""
    batch = "batch" in (job.params.get("inputs") or {})
    return [(name, value) for name, value in split_options(job.params.get("options", ""))[1]
            if name != "seed" and (name != "n" or batch)]


def command_line(job: Job) -> str:
    """The command that makes the job's result again: ``/demo --seed 7 --ar 1:1 a fox``."""
    pairs = [("seed", str(job.params["seed"])), *options_of(job)]
    return f"/{job.command} {format_options(pairs, job.params.get('prompt', ''))}"


def result_image(job: Job) -> str | None:
    """The file id of the job's last picture (its lossless file), for ⬆️ and ✏️."""
    outputs = (job.result or {}).get("outputs") or []
    return next((o["file_id"] for o in reversed(outputs) if o.get("kind") == "image"), None)


async def press(update: Update, context: CourierContext) -> None:
    """A press on a result's or ``/history``'s button: for the job's user only."""
    query = update.callback_query
    parsed = keyboards.parse(query.data)
    if parsed is None:
        await query.answer(context.t(update, "button_stale"), show_alert=True)
        return
    action, token = parsed
    if action == keyboards.KEEP:
        await keep_edit(update, context, token)
        return
    job = await buttons.job_of(context.pool, token)
    if job is None:
        await query.answer(context.t(update, "button_gone"), show_alert=True)
    elif job.user_id != update.effective_user.id:
        await query.answer(context.t(update, "button_not_yours"), show_alert=True)
    else:
        await ACTIONS[action](update, context, job, token)


async def queue_once(update: Update, context: CourierContext, token: str, action: str,
                     queue: Callable[[], Awaitable[bool]]) -> None:
    """``queue()`` on the first press of ``action`` under ``token``; a press it refused may come again."""
    query = update.callback_query
    if not await buttons.press(context.pool, token, action):
        await query.answer(context.t(update, "button_pressed"))
        return
    queued = False
    try:
        queued = await queue()
    finally:
        if not queued:
            await buttons.unpress(context.pool, token, action)
    await query.answer(context.t(update, "button_queued") if queued else None)  # if not, the chat says why


def rerun(seed: Callable[[Job], int], action: str):
    """A button that queues the job's command again with the same prompt and options, and ``seed(job)``."""
    async def run(update: Update, context: CourierContext, job: Job, token: str) -> None:
        params = {key: value for key, value in job.params.items() if key != "language"}

        async def queue() -> bool:
            return await queueing.queue_job(update, context, job.command, {**params, "seed": seed(job)}) is not None

        await queue_once(update, context, token, action, queue)
    return run


async def upscale(update: Update, context: CourierContext, job: Job, token: str) -> None:
    """⬆️: ``/upscale`` on the result."""
    image = result_image(job)
    if image is None:
        await update.callback_query.answer(context.t(update, "button_no_image"), show_alert=True)
        return
    await queue_once(update, context, token, keyboards.UPSCALE,
                     functools.partial(queueing.queue_command, update, context, UPSCALE_COMMAND, "", image))


async def edit(update: Update, context: CourierContext, job: Job, token: str) -> None:
    """✏️: ask for the instruction, and wait for it."""
    query, say = update.callback_query, functools.partial(context.t, update)
    image = result_image(job)
    if image is None:
        await query.answer(say("button_no_image"), show_alert=True)
        return
    waiting = await buttons.wait_for_edit(context.pool, user_id=job.user_id, chat_id=update.effective_chat.id,
                                          job_id=job.id, payload={"file_id": image}, valid_s=EDIT_VALID_S)
    if waiting is None:
        await query.answer(say("edit_waiting"))
        return
    await query.answer()
    await update.effective_message.reply_text(
        say("edit_ask", minutes=EDIT_VALID_S // 60),
        reply_markup=InlineKeyboardMarkup([[keyboards.button(keyboards.KEEP, waiting, say("button_cancel_edit"))]]))


async def edit_instruction(update: Update, context: CourierContext) -> bool:
    """The user's text where an edit waits for its instruction: the edit, queued; False if none waits."""
    message = update.effective_message
    pending = await buttons.take_edit(context.pool, user_id=update.effective_user.id, chat_id=message.chat_id)
    if pending is None:
        return False
    configured = context.settings.edit_command
    name = await edit_command(context, configured)
    if name != configured:
        await message.reply_text(context.t(update, "edit_fallback", name=configured, fallback=name))
    await queueing.queue_command(update, context, name, message.text, pending.payload["file_id"])
    return True


def edit_choice(configured: str, needed: list[ModelFile], offers: Collection[Collection[str]],
                fallback_runs: bool) -> str:
    """The command ✏️ runs: ``configured``, unless ``needed`` (its model files) are missing on every
    backend of ``offers`` and the fallback command can run instead (enabled, with a checkpoint)."""
    if configured != FALLBACK_EDIT_COMMAND and fallback_runs and missing_everywhere(needed, offers):
        return FALLBACK_EDIT_COMMAND
    return configured


async def edit_command(context: CourierContext, configured: str) -> str:
    """``edit_choice`` for ``configured`` with the stored commands and the backends taking jobs."""
    command = await commands.get_command(context.pool, configured)
    if command is None:  # the reply says it is unknown
        return configured
    fallback = await commands.get_command(context.pool, FALLBACK_EDIT_COMMAND)
    taking = await backends.taking_jobs(context.pool)
    offers = [models for row in taking if (models := known_models(row)) is not None]
    fallback_runs = fallback is not None and fallback.enabled and bool(backends.model_files(taking).get(CHECKPOINTS))
    return edit_choice(configured, needed_files(command.workflow), offers, fallback_runs)


async def cancel_edit(update: Update, context: CourierContext) -> bool:
    """``/cancel``: stop waiting for an edit's instruction in this chat; whether one was waiting."""
    return await buttons.take_edit(context.pool, user_id=update.effective_user.id,
                                   chat_id=update.effective_chat.id) is not None


async def keep_edit(update: Update, context: CourierContext, token: str) -> None:
    """The edit prompt's cancel button: for the user whose edit waits only."""
    query = update.callback_query
    presser = update.effective_user.id
    pending = await access.take_pending_action(context.pool, token, user_id=presser, action="edit")
    if pending is None:
        if await access.pending_action_user(context.pool, token) not in (None, presser):
            await query.answer(context.t(update, "button_not_yours"), show_alert=True)
        else:
            await query.answer(context.t(update, "edit_stale"))
        return
    await query.answer()
    await query.edit_message_text(context.t(update, "edit_cancelled"))


async def info(update: Update, context: CourierContext, job: Job, token: str) -> None:
    """ℹ️: the command, prompt, options and seed that made the result, with the command line to copy;
    once per ``INFO_EVERY_S`` per result (a press sooner is only answered: the message is there)."""
    now, shown = time.monotonic(), context.bot_data.info_shown
    for seen in [seen for seen, when in shown.items() if now - when >= INFO_EVERY_S]:
        del shown[seen]
    if token in shown:
        await update.callback_query.answer(context.t(update, "info_shown"))
        return
    shown[token] = now
    say = functools.partial(context.t, update)
    params = job.params
    options = format_options(options_of(job)) or say("info_no_options")
    code = f"<code>{html.escape(command_line(job))}</code>"
    text = say("info", command=job.command, seed=params["seed"], options=html.escape(options),
               prompt=html.escape(params.get("prompt") or "-"), line=code)
    if params.get("image_file_id"):
        text += "\n" + say("info_image")
    await update.callback_query.answer()
    await update.effective_message.reply_text(text, parse_mode=ParseMode.HTML)


async def delete(update: Update, context: CourierContext, job: Job, token: str) -> None:
    """🗑: the result's files, records and the bot's messages of it."""
    left = await buttons.delete_result(context.pool, job.id, job.user_id)
    if not left.jobs:  # a press at the same time took it
        await update.callback_query.answer(context.t(update, "button_gone"))
        return
    files_kept, messages_kept = await forget.delete_leftovers(context, left)
    await update.callback_query.answer(
        context.t(update, "deleted_partly", files=files_kept, messages=messages_kept)
        if files_kept or messages_kept else context.t(update, "deleted"))


ACTIONS = {keyboards.SEED: rerun(lambda job: queueing.new_seed(), keyboards.SEED),
           keyboards.AGAIN: rerun(lambda job: job.params["seed"], keyboards.AGAIN),
           keyboards.UPSCALE: upscale, keyboards.EDIT: edit, keyboards.INFO: info, keyboards.DELETE: delete}


async def history(update: Update, context: CourierContext) -> None:
    """``/history``: the user's last results in this chat, each with a 🔁 button to run it again."""
    say = functools.partial(context.t, update)
    message = update.effective_message
    found = await buttons.history(context.pool, update.effective_user.id, message.chat_id, HISTORY_LENGTH)
    if not found:
        await message.reply_text(say("history_none"))
        return
    lines, again = [say("history_title")], []
    for number, job in enumerate(found, 1):
        line = command_line(job)
        if len(line) > HISTORY_LINE_CHARS:
            line = line[:HISTORY_LINE_CHARS - 1] + "…"
        code, date = f"<code>{html.escape(line)}</code>", f"{job.finished_at:%Y-%m-%d %H:%M}"
        lines.append(say("history_line", number=number, line=code, date=date))
        label = say("button_again", number=number)
        again.append(keyboards.button(keyboards.AGAIN, await buttons.issue(context.pool, job.id), label))
    await message.reply_text("\n".join(lines), parse_mode=ParseMode.HTML, reply_markup=InlineKeyboardMarkup(
        [again[i:i + AGAIN_PER_ROW] for i in range(0, len(again), AGAIN_PER_ROW)]))
