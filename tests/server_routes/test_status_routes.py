"""Read-only routes against real PostgreSQL: the queue per user, sessions, backends, benchmark runs."""

import pytest

from comfyui_courier.store import backends, benchmarks, jobs, queue_messages, sessions
from comfyui_courier.tests.support import jobs as support_jobs
from comfyui_courier.tests.support.users import upsert_user

ALICE, BOB = 11, 22


async def queue_jobs(store):
    ids = {}
    for user, n in ((ALICE, 2), (BOB, 1)):
        await upsert_user(store.pool, user, f"user{user}")
        for i in range(n):
            ids[(user, i)] = (await support_jobs.enqueue(store.pool, user_id=user, chat_id=user, command="demo",
                                                         params={"prompt": f"secret prompt {user}"},
                                                         profile=(f"user{user}", None, None))).job_id
    return ids


async def test_queue_lists_running_then_queued_jobs_per_user(api, store):
    ids = await queue_jobs(store)
    running = await jobs.claim(store.pool, "worker-1", 60)
    status, reply, _ = await api.get("/courier/jobs", token=None)
    assert status == 200
    listed = reply["jobs"]
    assert listed[0]["id"] == running.id and listed[0]["status"] == "running"
    assert [j["position"] for j in listed[1:]] == [1, 2]
    assert "secret prompt" not in str(reply)  # the users' prompts stay private
    assert set(listed[0]) == {"id", "user_id", "chat_id", "command", "status", "position", "attempts", "backend",
                              "progress", "error", "created_at", "started_at", "starts_in_s"}
    assert [j["starts_in_s"] for j in listed[1:]] == [None, None]  # /demo has no run yet: no estimate
    per_user = {u["user_id"]: u for u in reply["users"]}
    assert per_user[running.user_id]["running"] == 1
    assert sum(u["queued"] for u in reply["users"]) == 2
    assert reply["users"][0]["user_id"] == running.user_id  # the user being served first

    status, mine, _ = await api.get(f"/courier/jobs?user_id={BOB}", token=None)
    assert {j["user_id"] for j in mine["jobs"]} == {BOB}
    assert len(mine["jobs"]) == 1 and ids[(BOB, 0)] == mine["jobs"][0]["id"]


async def test_the_queue_says_when_each_job_starts_as_its_chat_is_told(api, store):
    await backends.register_backends(store.pool, ["http://127.0.0.1:1"], capacity=1)
    await support_jobs.seed_runs(store.pool, "demo", 5.0, 3)
    await queue_jobs(store)
    status, reply, _ = await api.get("/courier/jobs", token=None)
    told = {job.id: job.starts_in_s for user in (ALICE, BOB)
            for job in (await queue_messages.hold(store.pool, user, 0, 10)).queued}
    assert status == 200 and {j["id"]: j["starts_in_s"] for j in reply["jobs"]} == told
    assert sorted(told.values()) == [0, 5.0, 10.0]


@pytest.mark.parametrize("query", ["user_id=abc", "user_id=1.5", "user_id=99999999999999999999", "user_id="])
async def test_queue_refuses_bad_user_ids(api, query):
    status, reply, _ = await api.get(f"/courier/jobs?{query}")
    assert (status, reply["error"]["code"]) == (400, "bad_query")


async def test_sessions_summarize_each_user(api, store):
    """Every count differs between users and statuses, so a swapped column or user shows."""
    carol = 5  # no chats, no jobs: listed last although her id sorts first
    for user in (ALICE, BOB, carol):
        await upsert_user(store.pool, user, f"user{user}")

    async def enqueue(user):
        return (await support_jobs.enqueue(store.pool, user_id=user, chat_id=user, command="demo", params={},
                                           profile=(f"user{user}", None, None))).job_id

    async def run_alone(user):  # the only queued job, so the claim takes it
        job_id = await enqueue(user)
        claimed = await jobs.claim(store.pool, "worker-1", 60)
        assert claimed.id == job_id
        return job_id

    assert await jobs.succeed(store.pool, await run_alone(ALICE), {"outputs": []})
    assert await jobs.fail(store.pool, await run_alone(ALICE), "boom")
    for chat in (101, 102):
        await sessions.set_last_outputs(store.pool, chat, ALICE, [{"kind": "image", "file_id": "f"}])
    await run_alone(BOB)  # stays running
    await enqueue(BOB)
    await enqueue(BOB)
    assert await jobs.cancel_job(store.pool, await enqueue(BOB))  # Bob acted last

    status, reply, _ = await api.get("/courier/sessions", token=None)
    assert status == 200
    columns = ("user_id", "chats", "queued", "running", "succeeded", "failed", "cancelled")
    assert [tuple(u[c] for c in columns) for u in reply["users"]] == [
        (BOB, 0, 2, 1, 0, 0, 1), (ALICE, 2, 0, 0, 1, 1, 0), (carol, 0, 0, 0, 0, 0, 0)]
    assert [u["username"] for u in reply["users"]] == [f"user{BOB}", f"user{ALICE}", f"user{carol}"]
    bob, alice, carol_row = reply["users"]
    assert bob["last_active_at"] > alice["last_active_at"] and carol_row["last_active_at"] is None
    status, reply, _ = await api.get("/courier/sessions?limit=2", token=None)
    assert [u["user_id"] for u in reply["users"]] == [BOB, ALICE]
    status, reply, _ = await api.get("/courier/sessions?limit=0")
    assert status == 400


async def test_backends_without_a_dispatcher_are_listed_not_probed(courier_api, store):
    api = await courier_api({"COURIER_BACKENDS": "http://user:pw@127.0.0.1:9/,http://abc.anon"}, store=store)
    status, reply, _ = await api.get("/courier/backends", token=None)
    assert status == 200
    assert [(b["url"], b["kind"], b["reachable"]) for b in reply["backends"]] == [
        ("http://127.0.0.1:9/", "loopback", None), ("http://abc.anon", "anon", None)]
    assert "dispatcher is not running" in reply["backends"][0]["error"]
    assert "pw" not in str(reply)


async def test_benchmark_runs_newest_first(api, store):
    for name in ("flux", "wan"):
        await benchmarks.add_benchmark_run(store.pool, workflow=name, device="cpu", wall_s=[1.0, 2.0],
                                           stats={"median": 1.5, "min": 1.0, "max": 2.0})
    status, reply, _ = await api.get("/courier/benchmarks", token=None)
    assert status == 200
    assert [r["workflow"] for r in reply["runs"]] == ["wan", "flux"]
    assert reply["runs"][0]["stats"]["median"] == 1.5 and "per_node" not in reply["runs"][0]
    status, reply, _ = await api.get("/courier/benchmarks?workflow=flux&limit=1")
    assert [r["workflow"] for r in reply["runs"]] == ["flux"]
    for query in ("limit=0", "limit=201", "limit=x", "workflow=" + "w" * 300, "workflow=a%00b"):
        status, reply, _ = await api.get(f"/courier/benchmarks?{query}")
        assert (status, reply["error"]["code"]) == (400, "bad_query"), query
