"""Read-only routes against real PostgreSQL: the queue per user, sessions, backends, benchmark runs."""

import pytest

from comfyui_courier.store import benchmarks, jobs, sessions, users

ALICE, BOB = 11, 22


async def queue_jobs(store):
    ids = {}
    for user, n in ((ALICE, 2), (BOB, 1)):
        await users.upsert_user(store.pool, user, f"user{user}")
        for i in range(n):
            ids[(user, i)] = (await jobs.enqueue(store.pool, user_id=user, chat_id=user, command="demo",
                                                 params={"prompt": f"secret prompt {user}"})).job_id
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
                              "progress", "error", "created_at", "started_at"}
    per_user = {u["user_id"]: u for u in reply["users"]}
    assert per_user[running.user_id]["running"] == 1
    assert sum(u["queued"] for u in reply["users"]) == 2
    assert reply["users"][0]["user_id"] == running.user_id  # the user being served first

    status, mine, _ = await api.get(f"/courier/jobs?user_id={BOB}", token=None)
    assert {j["user_id"] for j in mine["jobs"]} == {BOB}
    assert len(mine["jobs"]) == 1 and ids[(BOB, 0)] == mine["jobs"][0]["id"]


@pytest.mark.parametrize("query", ["user_id=abc", "user_id=1.5", "user_id=99999999999999999999", "user_id="])
async def test_queue_refuses_bad_user_ids(api, query):
    status, reply, _ = await api.get(f"/courier/jobs?{query}")
    assert (status, reply["error"]["code"]) == (400, "bad_query")


async def test_sessions_summarize_each_user(api, store):
    await queue_jobs(store)
    job = await jobs.claim(store.pool, "worker-1", 60)
    await jobs.succeed(store.pool, job.id, {"outputs": []})
    await sessions.set_last_outputs(store.pool, job.chat_id, job.user_id, [{"kind": "image", "file_id": "f"}])
    status, reply, _ = await api.get("/courier/sessions", token=None)
    assert status == 200
    by_user = {u["user_id"]: u for u in reply["users"]}
    served = by_user[job.user_id]
    assert (served["chats"], served["succeeded"]) == (1, 1)
    other = by_user[BOB if job.user_id == ALICE else ALICE]
    assert (other["chats"], other["succeeded"], other["queued"]) == (0, 0, 1 if other["user_id"] == BOB else 2)
    assert reply["users"][0]["user_id"] in (ALICE, BOB) and served["last_active_at"]
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
    for query in ("limit=0", "limit=201", "limit=x", "workflow=" + "w" * 300):
        status, reply, _ = await api.get(f"/courier/benchmarks?{query}")
        assert (status, reply["error"]["code"]) == (400, "bad_query"), query
