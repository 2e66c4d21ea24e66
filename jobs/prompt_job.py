"""The runner of a command's job: fill the workflow, run it, send its outputs to the chat."""

from __future__ import annotations

from .. import imaging
from ..store import sessions
from .ports import InputUnavailable
from .runner import JobError, JobRun
from .workflow import fill_job, output_nodes

KIND = "prompt"  # the kind of a job whose params name none


async def run(run: JobRun) -> dict:
    job, client, say = run.job, run.client, run.say
    image_name = ""
    if job.params.get("image_file_id"):
        data = await fetch_image(run, job.params["image_file_id"])
        image_name = await client.upload_image(data, f"job-{job.id}.png")
    workflow = fill_job(job.params["workflow"], prompt=job.params.get("prompt", ""), seed=job.params["seed"],
                        image=image_name, chat_id=job.chat_id, user_id=job.user_id)

    async def on_progress(event) -> None:
        if event.max:
            await run.status.update(say("progress", name=job.command, value=event.value, max=event.max,
                                        percent=int(100 * event.value / event.max)))

    result = await client.run_prompt(workflow, on_progress=on_progress, prompt_id=run.prompt_id)
    run.left_backend()
    wanted = set(output_nodes(workflow))
    delivered = []
    for node_id, output in result.outputs.items():
        if node_id not in wanted:
            continue
        for ref in output.get("images", []) + output.get("gifs", []) + output.get("videos", []):
            data = await client.view(ref["filename"], ref.get("subfolder", ""), ref.get("type", "output"))
            record = await run.sink.send_result(job.chat_id, job.reply_to_message_id, ref["filename"], data)
            delivered.append({**record, "job_id": job.id})
    if delivered:
        await sessions.set_last_outputs(run.pool, job.chat_id, job.user_id, delivered)
    return {"prompt_id": result.prompt_id, "outputs": delivered, "execution_ms": result.execution_ms}


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
