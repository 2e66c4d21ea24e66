"""/bench and /compare end to end: python-telegram-bot ⇄ Bot API emulator, real PostgreSQL, the dispatcher,
and a ComfyUI backend: the fake one with a scripted Benchmark node (``bench_standin``), and a real one with
the real node when COMFYUI_DIR is set."""

import io
import json

import pytest
from PIL import Image

from comfyui_courier.gpu.runs import BenchmarkRun
from comfyui_courier.gpu.storage import load_runs, save_run
from comfyui_courier.jobs import bench
from comfyui_courier.store import backends as backend_table
from comfyui_courier.tests.jobs.bench_standin import StandIn, install
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import until
from comfyui_courier.tests.support.requires import require_comfyui

ADMIN = 111
USER = 222  # allowed, not an admin
DONE_TIMEOUT_S = 60


@pytest.fixture
async def fake():
    async with FakeComfyUI(steps=0) as server:
        yield server


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, fake, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{ADMIN},{USER}", COURIER_ADMIN_USERS=f"{ADMIN}") as service:
        yield service


def texts(bot) -> list[str]:
    return [c.params.get("text") or "" for c in bot.outbox if c.method in ("sendMessage", "editMessageText")]


async def reply_with(bot, needle: str, timeout: float = 10):
    try:
        return await bot.wait_for_call("sendMessage", where=lambda c: needle in (c.params.get("text") or ""),
                                       timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"no reply with {needle!r}; the bot said {texts(bot)}") from None


async def job_rows(courier):
    async with courier.store.pool.acquire() as conn:
        return await conn.fetch("SELECT command, status, params, result, error FROM courier_jobs ORDER BY id")


def replies_to(request):
    return lambda call: call.result.get("reply_to_message", {}).get("message_id") == request["message_id"]


def png(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    return image


async def test_only_admins_may_bench_or_compare(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/bench demo 2")
    await reply_with(botapi_bot, "/bench is for the bot's admins only")
    botapi_bot.emulator.add_user(USER, "Uta", language_code="de")
    botapi_bot.inject_text(USER, "/compare")
    await reply_with(botapi_bot, "/compare ist nur für die Admins")
    assert await job_rows(courier) == []


@pytest.mark.parametrize("text, needle", [
    ("/bench", "Usage: /bench <command> [runs]"),
    ("/bench demo 0", "runs from 1 to 20"),
    ("/bench demo 21", "runs from 1 to 20"),
    ("/bench demo three", "Usage"),
    ("/bench demo 2 extra", "Usage"),
    ("/bench de$mo", "Usage"),
    ("/bench demo 2 @", "Usage"),
    ("/bench @1", "Usage"),
    ("/bench nosuch", "I don't know /nosuch"),
])
async def test_bench_explains_what_it_takes(courier, botapi_bot, text, needle):
    botapi_bot.inject_text(ADMIN, text)
    reply = await reply_with(botapi_bot, needle)
    if "Usage" in needle or "runs from" in needle:
        assert "/demo" in reply.params["text"]  # the commands it can bench
    assert await job_rows(courier) == []


async def test_bench_runs_a_session_and_replies_with_report_and_chart(courier, botapi_bot, fake):
    standin = install(fake, StandIn())
    copy_ids = standin.ids(2 + 1)  # runs 1, 2 and the report run
    row = await save_run(courier.store.pool, BenchmarkRun(
        workflow="demo", device="Fake GPU", host="fake-host", comfyui_version="0.3.64", torch_version="2",
        repeats=2, warmup=1, wall_s=[0.01, 0.01], stats={}, per_node={}, peak_memory_bytes=None,
        extra={"prompt_ids": copy_ids[:2]}))  # what the real node stores: its measured runs' prompt ids
    standin.stored_id = row.id

    request = botapi_bot.inject_text(ADMIN, "/bench demo 2")
    status = await botapi_bot.wait_for_call("sendMessage", where=lambda c: (c.params.get("text") or "").startswith(
        ("Benchmark of /demo queued", "Rendering /bench")), timeout=10)  # the dispatcher's, if it came first
    assert status.params["text"].startswith("Rendering") or "1 warm-up + 2 measured runs" in status.params["text"]
    report = await reply_with(botapi_bot, "Benchmark: demo", timeout=DONE_TIMEOUT_S)
    assert replies_to(request)(report)
    assert f"Stored as benchmark run #{row.id}; /compare shows it" in report.params["text"]
    chart = await botapi_bot.wait_for_call("sendDocument", timeout=DONE_TIMEOUT_S)
    assert chart.result["document"]["file_name"] == "benchmark-demo.png"
    image = png(botapi_bot.file_bytes(chart.result["document"]["file_id"]))
    assert image.size == (96, 54) and "prompt" not in image.info  # lossless, the workflow stripped
    await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].startswith("Done"),
                                   timeout=DONE_TIMEOUT_S)
    [job] = await job_rows(courier)
    assert (job["command"], job["status"]) == ("bench", "succeeded")
    result = json.loads(job["result"]) if isinstance(job["result"], str) else job["result"]
    assert result["benchmark_run_id"] == row.id and result["prompt_ids"][1:] == copy_ids
    assert standin.runs == [0, 1, 2, 3]
    first = fake.prompts[0]["prompt"]  # filled like a job: the fixed prompt and seed
    assert (first["1"]["inputs"]["prompt"], first["1"]["inputs"]["seed"]) == (bench.PROMPT, bench.SEED)
    assert first["1"]["inputs"]["chat_id"] == str(ADMIN)


@pytest.mark.parametrize("lost", ["sendMessage", "sendDocument"])  # the report, the chart
async def test_a_bench_whose_answer_is_lost_is_done_unconfirmed_never_failed_nor_sent_twice(courier, botapi_bot,
                                                                                            fake, lost):
    install(fake, StandIn())
    fake.pause()
    botapi_bot.inject_text(ADMIN, "/bench demo 1")
    # the status is out (an edit of the Queued reply, or posted before it)
    await botapi_bot.emulator.wait_for(lambda: any(
        c.method in ("sendMessage", "editMessageText") and c.params["text"].startswith("Rendering /bench")
        for c in botapi_bot.outbox), timeout=DONE_TIMEOUT_S)  # so the next sendMessage is the report
    botapi_bot.hang(lost, perform=True)  # Telegram takes it; the answer never comes
    fake.resume()
    done = await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].startswith("Done"),
                                          timeout=DONE_TIMEOUT_S)
    assert "Telegram did not confirm" in done.params["text"]
    [job] = await job_rows(courier)
    assert job["status"] == "succeeded"
    assert not any("failed" in text for text in texts(botapi_bot))
    reports = [c for c in botapi_bot.calls if c.method == "sendMessage" and "Benchmark: demo" in c.params["text"]]
    assert len(reports) == 1 and len([c for c in botapi_bot.calls if c.method == "sendDocument"]) == 1


async def test_bench_of_an_edit_command_uses_the_fixed_picture(courier, botapi_bot, fake):
    install(fake, StandIn())
    botapi_bot.inject_text(ADMIN, "/bench demoedit 1")
    report = await reply_with(botapi_bot, "Benchmark: demoedit", timeout=DONE_TIMEOUT_S)
    assert "not stored" in report.params["text"] and "#" not in report.params["text"]
    assert fake.files[("input", "courier", "courier-bench.png")] == bench.bench_picture()
    assert fake.prompts[0]["prompt"]["1"]["inputs"]["image"] == "courier/courier-bench.png"


async def test_a_run_stored_in_another_database_is_named_as_such(courier, botapi_bot, fake):
    install(fake, StandIn(stored_id=424242))
    botapi_bot.inject_text(ADMIN, "/bench demo 1")
    report = await reply_with(botapi_bot, "Benchmark: demo", timeout=DONE_TIMEOUT_S)
    assert "in its own database (#424242), not in the bot's" in report.params["text"]


async def test_bench_on_a_backend_without_the_pack_fails_clearly(courier, botapi_bot):
    botapi_bot.inject_text(ADMIN, "/bench demo")
    failed = await botapi_bot.wait_for_call("editMessageText", where=lambda c: "failed" in c.params["text"],
                                            timeout=DONE_TIMEOUT_S)
    assert "not installed: CourierBenchmark" in failed.params["text"]
    [job] = await job_rows(courier)
    assert job["status"] == "failed"


@pytest.fixture
async def two_fakes():
    async with FakeComfyUI(steps=0) as first, FakeComfyUI(steps=0) as second:
        yield first, second


async def test_bench_at_a_backend_runs_on_that_backend_only(botapi, botapi_bot, pg_database, two_fakes, tmp_path):
    """``/bench demo 1 @<id>`` and ``@<host:port>`` each run where they name; an unknown name lists the known."""
    first, second = two_fakes
    for fake in two_fakes:
        install(fake, StandIn())
    async with running_courier(botapi, botapi_bot, pg_database, first.url, tmp_path,
                               COURIER_BACKENDS=f"{first.url},{second.url}",
                               COURIER_ALLOWED_USERS=f"{ADMIN},{USER}", COURIER_ADMIN_USERS=f"{ADMIN}") as courier:
        ids = {b.url: b.id for b in await backend_table.list_backends(courier.store.pool)}
        botapi_bot.inject_text(ADMIN, "/bench demo 1 @nosuch")
        known = f"@{ids[first.url]} ({first.url}), @{ids[second.url]} ({second.url})"
        await reply_with(botapi_bot, f"There is no backend @nosuch. Known backends: {known}")
        assert await job_rows(courier) == []

        for count, (text, target) in enumerate(((f"/bench demo 1 @{ids[second.url]}", second),
                                                (f"/bench demo @{first.url.split('://')[1]}", first)), 1):
            botapi_bot.inject_text(ADMIN, text)
            rows = await until(lambda n=count: _finished_jobs(courier, n), DONE_TIMEOUT_S, f"{text} done")
            assert (rows[-1]["status"], rows[-1]["backend"], rows[-1]["pinned"]) == (
                "succeeded", target.url, target.url), rows[-1]
        assert len(first.prompts) == len(second.prompts) == 1  # each session's first run (the node queues the rest)

        await backend_table.set_backend(courier.store.pool, ids[second.url], draining=True)
        botapi_bot.inject_text(ADMIN, f"/bench demo @{ids[second.url]}")
        await reply_with(botapi_bot, f"Backend #{ids[second.url]} ({second.url}) takes no jobs now: draining. "
                                     "Nothing is queued")
        assert len(await job_rows(courier)) == 2
        assert all(p["prompt"]["1"]["inputs"]["prompt"] == bench.PROMPT for p in first.prompts + second.prompts)


async def _finished_jobs(courier, count: int):
    """The job rows once there are ``count`` and all have ended; None before."""
    async with courier.store.pool.acquire() as conn:
        rows = await conn.fetch("SELECT status, backend, params->>'backend' AS pinned FROM courier_jobs ORDER BY id")
    return rows if len(rows) == count and all(row["status"] in ("succeeded", "failed") for row in rows) else None


def stored(workflow, device, seconds, host="box"):
    return BenchmarkRun(workflow=workflow, device=device, host=host, comfyui_version="0.3.64", torch_version="2",
                        repeats=len(seconds), warmup=1, wall_s=list(seconds), stats={}, per_node={},
                        peak_memory_bytes=None)


async def compare_reply(bot, text):
    """The message and the chart that answer ``text`` (the calls after it: /compare answers at once)."""
    before = len(bot.outbox)
    bot.inject_text(ADMIN, text)
    message = await bot.wait_for_call("sendMessage", where=lambda c: c in bot.outbox[before:])
    chart = await bot.wait_for_call("sendDocument", where=lambda c: c in bot.outbox[before:])
    assert message.params["parse_mode"] == "HTML"
    return message.result["text"], png(bot.file_bytes(chart.result["document"]["file_id"]))


async def test_compare_sends_the_table_and_the_chart(courier, botapi_bot):
    text, chart = await compare_reply(botapi_bot, "/compare")
    assert "No stored benchmark runs yet" in text and "Reference: the seed's published" in text
    assert "33.5 %" in text and "1.50x" in text  # SD 3.5, the seed's way and as a ratio
    assert chart.size == (960, 36 + 540)

    for run in (stored("demo", "Intel(R) Xeon(R) CPU @ 2.20GHz", [2.0]), stored("demo", "NVIDIA H200", [0.5], "gpu"),
                stored("demo", "NVIDIA H100", [0.8], "gpu2")):
        await save_run(courier.store.pool, run)
    text, chart = await compare_reply(botapi_bot, "/compare")
    assert "Stored runs" in text
    assert "old: NVIDIA H100 (gpu2)\nnew: NVIDIA H200 (gpu)" in text  # the two run last; the slower is old
    assert "37.5 %" in text and "1.60x" in text and "Also stored: Intel(R) Xeon(R) CPU @ 2.20GHz (box)" in text
    assert chart.size == (960, 540 + 36 + 540)

    text, chart = await compare_reply(botapi_bot, "/compare /demo")
    assert "Reference" not in text and chart.size == (960, 540)
    text, chart = await compare_reply(botapi_bot, "/compare SD 3.5")
    assert "No stored benchmark runs of SD 3.5 yet" in text and "8.96" in text


async def test_compare_with_one_device_says_what_is_missing(courier, botapi_bot):
    await save_run(courier.store.pool, stored("demo", "cpu", [1.0]))
    botapi_bot.inject_text(ADMIN, "/compare demo")
    await reply_with(botapi_bot, "Every stored run of demo is from one device (cpu (box))")


async def test_bench_with_a_real_comfyui(botapi, botapi_bot, pg_database, comfyui_factory, tmp_path):
    """The real Benchmark node on a real ComfyUI whose pack shares the bot's database."""
    require_comfyui()
    backend = comfyui_factory(env={"COURIER_DATABASE_URL": pg_database})
    async with running_courier(botapi, botapi_bot, pg_database, backend.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{ADMIN},{USER}", COURIER_ADMIN_USERS=f"{ADMIN}") as courier:
        botapi_bot.inject_text(ADMIN, "/bench demo 2")
        report = await reply_with(botapi_bot, "Benchmark: demo", timeout=180)
        text = report.params["text"]
        assert "2 measured runs after 1 warm-up" in text, text
        assert "Stored as benchmark run #" in text, text + "\n" + backend.log_tail()
        chart = await botapi_bot.wait_for_call("sendDocument", timeout=60)
        image = png(botapi_bot.file_bytes(chart.result["document"]["file_id"]))
        assert image.size == (960, 540) and not {"prompt", "workflow"} & set(image.info)
        [run] = await load_runs(courier.store.pool, workflow="demo")
        assert run.repeats == 2 and len(run.extra["prompt_ids"]) == 2 and run.device
        await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].startswith("Done"),
                                       timeout=60)
        [job] = await job_rows(courier)
        result = json.loads(job["result"]) if isinstance(job["result"], str) else job["result"]
        assert job["status"] == "succeeded" and result["benchmark_run_id"] == run.id
        assert set(run.extra["prompt_ids"]) <= set(result["prompt_ids"])

        await save_run(courier.store.pool, stored("demo", "Some GPU", [run.stats["median"] / 4], "elsewhere"))
        text, chart = await compare_reply(botapi_bot, "/compare demo")
        assert f"{run.device} ({run.host})" in text and "75.0 %" in text and "4.00x" in text
