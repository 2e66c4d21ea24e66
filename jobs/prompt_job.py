"""The runner of a command's job: fill the workflow, run it, send its outputs to the chat.

Sending waits out a Telegram outage: results Telegram fails for sure (``ChatUnavailable``, after
``bot/sending.py``'s quick tries) are kept in PostgreSQL and the job parked as 'delivering'
(``store.deliveries.park``), its backend slot already free; they are tried again with the
delivery's ``Patience`` (``COURIER_DELIVERY_PATIENCE_S``), counted from when the job began to wait,
by this host or, if it dies, by another (``resume``). Then the job fails with Telegram's reason.
Its status message says that the result waits, where Telegram still takes edits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping

from ..core import imaging
from ..core.logs import get_logger
from ..store import buttons, deliveries, sessions
from ..store.privacy import INPUT_SUBFOLDER, input_filename
from . import upscale
from .comfy.client import ComfyClient
from .comfy.records import PromptResult
from .file_inputs import graph_file_problem
from .ports import (
    ChatBlocked,
    ChatError,
    ChatUnavailable,
    DeliveryFailed,
    InputUnavailable,
    Patience,
    ResultExtras,
    SentFn,
    UploadTooLarge,
)
from .runner import JobError, JobRun, elapsed_s, send_each_once
from .workflow import OUTPUT_NODE, fill_job, nodes_of, output_nodes

KIND = "prompt"  # the kind of a job whose params name none
ALBUM_MAX = 10  # items in one Telegram album (media group)

log = get_logger("jobs")


async def run(run: JobRun) -> dict:
    job, client, say = run.job, run.client, run.say
    image_name = ""
    if job.params.get("image_file_id"):
        data = await fetch_image(run, job.params["image_file_id"])
        image_name = await client.upload_image(data, input_filename(job.id), INPUT_SUBFOLDER)
    graph = await upscale.for_backend(job.params["workflow"], run.pool, job.backend)
    workflow = fill_job(graph, prompt=job.params.get("prompt", ""), seed=job.params["seed"],
                        image=image_name, chat_id=job.chat_id, user_id=job.user_id,
                        options=job.params.get("inputs"), job=run.prompt_id)
    if (problem := graph_file_problem(workflow)) is not None:  # stored before publishing checked files
        raise JobError(say(problem.key, **problem.params))

    steps = StepClock()

    async def on_progress(event) -> None:
        if event.max:
            shown = {"name": job.command, "value": event.value, "max": event.max,
                     "percent": int(100 * event.value / event.max)}
            left = steps.seconds_left(event.node, event.value, event.max)
            await run.status.update(say("progress", **shown) if not left
                                    else say("progress_eta", **shown, seconds=left), percent=shown["percent"])

    async def on_preview(preview) -> None:  # a sampler's (a result node's pushed files are no previews)
        await run.status.preview(preview.image)

    with run.handoff.expect(run.prompt_id) as handed:
        result = await client.run_prompt(workflow, on_progress=on_progress, prompt_id=run.prompt_id,
                                         result_nodes=nodes_of(workflow, OUTPUT_NODE),
                                         on_preview=on_preview if run.settings.live_previews else None)
    run.left_backend()
    files = [file async for file in result_files(client, result, handed, set(output_nodes(workflow)))]
    run.status.results_follow()
    return {"prompt_id": result.prompt_id, "execution_ms": result.execution_ms, **await send_results(run, files)}


async def resume(run: JobRun) -> dict:
    """Send what a delivering job kept: its worker died while its results waited for Telegram."""
    kept, since = await deliveries.kept_files(run.pool, run.job.id)
    run.left_backend()  # rendered long ago
    run.status.results_follow()
    files = [ResultFile(file.filename, file.subfolder, file.type, file.data, file.via, file.output) for file in kept]
    return await send_results(run, files, since)


async def send_results(run: JobRun, files: list[ResultFile], since: datetime.datetime | None = None) -> dict:
    """Deliver ``files`` through an outage (``since``: when the job began to wait, if it did); the
    job's result record (``done_s``: what its "Done in" says, the caption and the last status alike)."""
    job = run.job
    token = await buttons.issue(run.pool, job.id)
    records, done_s = await deliver_patiently(run, files, token, since)
    delivered = [record for record in records if record is not None]
    if chained := [record for record in delivered if record.get("file_id")]:
        await sessions.set_last_outputs(run.pool, job.chat_id, job.user_id, chained)
    if delivered and "buttons" not in delivered[-1]:
        await offer_buttons(run, delivered[-1], token)
    return {"outputs": delivered,
            "unconfirmed": [file.output for file, record in zip(files, records, strict=True) if record is None],
            "captioned": bool(delivered) and bool(delivered[-1].get("captioned")), "done_s": done_s}


async def deliver_patiently(run: JobRun, files: list[ResultFile], token: str,
                            since: datetime.datetime | None) -> tuple[list[dict | None], float]:
    """``deliver`` until Telegram takes the files, parking the job while it waits (see the module);
    the records, and the seconds from the command to the files that went (the caption's "Done in").

    :raises JobError: refused, or Telegram still failing them when the patience is spent.
    :raises deliveries.NotRunning: the job was cancelled or its lease lost.
    """
    job, say = run.job, run.say
    patience = Patience.of_delivery(run.settings)
    tries = 0
    while True:
        done_s = elapsed_s(job)
        try:
            return await deliver(run, files, ResultExtras(say("done", seconds=done_s), token, say)), done_s
        except ChatUnavailable as exc:
            if since is None:
                since = await deliveries.park(run.pool, job.id, job.worker, [
                    deliveries.Kept(f.output, f.filename, f.subfolder, f.type, f.via, f.data) for f in files])
                log.warning("job %s: Telegram does not take its results (%s); they wait for it", job.id, exc)
                await run.status.update(say("telegram_down_result", name=job.command))  # where edits still go
            tries += 1
            wait_s = patience.wait_s(tries, exc.retry_after_s)
            waited_s = (datetime.datetime.now(datetime.UTC) - since).total_seconds()
            if waited_s + wait_s > patience.total_s:
                names = ", ".join(file.filename for file in files)
                raise JobError(say("delivery_failed", files=names, reason=str(exc))) from exc
            await asyncio.sleep(wait_s)


@dataclasses.dataclass
class StepClock:
    """A node's time left from its step rate so far: the first step's frame starts the clock."""

    clock: Callable[[], float] = time.monotonic
    node: str | None = None
    start: tuple[int, float] | None = None  # (step, time) of the node's first frame

    def seconds_left(self, node: str | None, value: int, total: int) -> int | None:
        """Whole seconds, to the nearest (rounded up, a rate a hair slower than its steps said a second
        too many), at least 1 until the last step (0); None until a second frame of the same node
        gives a rate."""
        now = self.clock()
        if self.start is None or node != self.node or value < self.start[0]:
            self.node, self.start = node, (value, now)
        done = value - self.start[0]
        if done <= 0:
            return None
        return max(1, round((total - value) * (now - self.start[1]) / done)) if value < total else 0


async def deliver(run: JobRun, files: list[ResultFile], extras: ResultExtras | None = None) -> list[dict | None]:
    """Send the job's files: still images that fit as albums (``ALBUM_MAX`` each), the rest one by one;
    a record per file, in order (None where nobody knows whether it went). ``extras`` (caption and
    buttons) ride on the last message.

    :raises JobError: a file (or album) was refused; the message names it and Telegram's reason.
    :raises ChatUnavailable: Telegram failed it for sure: an outage (a later try may send it).
    """
    limit = upload_limit(run)
    stills = [i for i, file in enumerate(files) if len(file.data) <= limit and imaging.is_still(file.filename)]
    albums = [stills[i:i + ALBUM_MAX] for i in range(0, len(stills), ALBUM_MAX)] if len(stills) > 1 else []
    alone = set(range(len(files))).difference(*albums)
    records: dict[int, dict | None] = {}
    groups = [*albums, *([i] for i in sorted(alone))]
    for number, group in enumerate(groups, 1):
        last = extras if number == len(groups) else None
        try:
            records.update(zip(group, await deliver_once(run, [files[i] for i in group], last), strict=True))
        except (ChatBlocked, ChatUnavailable):
            raise
        except DeliveryFailed as exc:  # refused, or still failing after the retries: say which and why
            names = ", ".join(files[i].filename for i in group)
            raise JobError(run.say("delivery_failed", files=names, reason=str(exc))) from exc
    return [records[i] for i in range(len(files))]


async def deliver_once(run: JobRun, files: list[ResultFile], extras: ResultExtras | None = None) -> list[dict | None]:
    """Send ``files`` (one, or an album) as ``send_each_once`` does: but those an earlier run of the
    job sent or may have; their records, None where nobody knows."""
    async def send(fresh: list[int]) -> list[dict]:
        chosen = [files[i] for i in fresh]

        def full(records: list[dict]) -> list[dict]:
            return [{**record, "subfolder": file.subfolder, "type": file.type,  # on the backend, for /forget
                     "job_id": run.job.id, "via": file.via} for file, record in zip(chosen, records, strict=True)]

        async def sent(records: list[dict]) -> None:  # the files went: known before their previews go
            for file, record in zip(chosen, full(records), strict=True):
                await deliveries.complete(run.pool, run.job.id, file.output, record)

        return full(await send_files(run, chosen, extras, sent))

    try:
        return await send_each_once(run, [file.output for file in files], send)
    except UploadTooLarge:
        if len(files) == 1:
            raise
        return [(await deliver_once(run, [file], extras if file is files[-1] else None))[0]
                for file in files]  # the server takes less than the setting


async def send_files(run: JobRun, files: list[ResultFile], extras: ResultExtras | None = None,
                     sent: SentFn | None = None) -> list[dict]:
    """One file, or an album; one beyond the upload limit is announced with its size instead.
    ``extras``: the caption and buttons of the job's last message (a line of text carries the buttons only);
    ``sent``: as ``ChatSink.send_result``.

    :raises DeliveryFailed, DeliveryUnconfirmed:
    """
    job, say = run.job, run.say
    if len(files) > 1:
        records = await run.sink.send_album(job.chat_id, job.reply_to_message_id,
                                            [(f.filename, f.data) for f in files], sent)
        try:  # Telegram shows no buttons under an album: the job's go on this line after it
            line = await run.sink.send_text(job.chat_id, say("album_results", count=len(files)),
                                            records[0]["message_ids"][0], extras)
            records[-1]["message_ids"].append(line)
            records[-1].update({"buttons": line} if extras is not None else {})
        except ChatError as exc:
            log.info("job %s: no line under its album: %s", job.id, exc)
        return records
    (file,) = files
    size_mb, limit_mb = len(file.data) / 1e6, run.settings.upload_limit_mb
    if len(file.data) > upload_limit(run):
        text = say("result_too_large", filename=file.filename, size_mb=size_mb, limit_mb=limit_mb)
    else:
        try:
            return [await run.sink.send_result(job.chat_id, job.reply_to_message_id, file.filename, file.data,
                                               extras, sent)]
        except UploadTooLarge:
            text = say("result_refused_for_size", filename=file.filename, size_mb=size_mb)
    message_id = await run.sink.send_text(job.chat_id, text, job.reply_to_message_id, extras)
    return [{"kind": "too_large", "filename": file.filename, "message_ids": [message_id],
             **({"buttons": message_id} if extras is not None else {})}]


def upload_limit(run: JobRun) -> int:
    """The largest file, in bytes, the chat's server takes from the bot (decimal MB, as Telegram counts)."""
    return int(run.settings.upload_limit_mb * 1e6)


async def offer_buttons(run: JobRun, last: dict, token: str) -> None:
    """The result buttons under the last message of the job's result, where they did not ride on it
    (its preview failed, or an earlier run sent it); best effort (the result is there)."""
    if not last.get("message_ids"):
        return
    try:
        await run.sink.offer_buttons(run.job.chat_id, last["message_ids"][-1], token, run.say)
    except ChatError as exc:  # e.g. a re-run: the buttons are there already
        log.info("job %s: no buttons under its result: %s", run.job.id, exc)


@dataclasses.dataclass(frozen=True)
class ResultFile:
    filename: str
    subfolder: str
    type: str
    data: bytes = dataclasses.field(repr=False)
    via: str  # "handoff" (in this process), "websocket" (pushed as frames) or "view" (fetched)
    output: str = ""  # "<node id>:<index>": the same in every run of the job, unlike the file name


async def result_files(client: ComfyClient, result: PromptResult, handed: Mapping[str, list[bytes]],
                       nodes: Collection[str]) -> AsyncIterator[ResultFile]:
    """The files the output ``nodes`` wrote, in order: as the node handed them over in this process
    or pushed them on the websocket, else fetched with ``/view`` (a video or a big result from
    elsewhere, a node ComfyUI answered from its cache, frames lost to a reconnect)."""
    for node_id, output in result.outputs.items():
        if node_id not in nodes:
            continue
        refs = output.get("images", []) + output.get("gifs", []) + output.get("videos", [])
        via, files = "view", None
        for source, given in (("handoff", handed.get(node_id)), ("websocket", result.pushed.get(node_id))):
            if given is not None and len(given) == len(refs):
                via, files = source, given
                break
        for index, ref in enumerate(refs):
            subfolder, folder_type = ref.get("subfolder", ""), ref.get("type", "output")
            data = files[index] if files is not None else await client.view(ref["filename"], subfolder, folder_type)
            yield ResultFile(ref["filename"], subfolder, folder_type, data, via, f"{node_id}:{index}")


async def fetch_image(run: JobRun, file_id: str) -> bytes:
    """The picture's bytes, once they prove to be an image within the limits.

    :raises JobError: the chat will not hand the file out (too big, gone), or it is no usable image.
    """
    say = run.say
    try:
        data = await run.sink.fetch_file(file_id)
    except InputUnavailable as exc:  # a retry cannot help: say why, once
        raise JobError(say("bad_image", reason=say(exc.key, **exc.params))) from None
    try:
        imaging.decode_image(data, int(run.settings.max_image_mb * 2**20))
    except imaging.BadImage as exc:
        raise JobError(say("bad_image", reason=say(exc.key, **exc.params))) from None
    return data
