"""Users, chat sessions, commands, backends and benchmark runs: round trips and their rules."""

import pytest

from comfyui_courier.store import StoreError, backends, benchmarks, commands, sessions, users
from comfyui_courier.tests.support.users import set_admin, upsert_user

WORKFLOW = {"3": {"class_type": "KSampler", "inputs": {"seed": 1}}}


async def test_users(store):
    created = await upsert_user(store.pool, 1, "ann", "Ann", "de")
    assert (created.username, created.is_admin, created.last_served_at) == ("ann", False, None)
    renamed = await upsert_user(store.pool, 1, username="ann2")
    assert (renamed.username, renamed.first_name, renamed.created_at) == ("ann2", None, created.created_at)
    assert (await set_admin(store.pool, 1, True)).is_admin
    assert (await users.get_user(store.pool, 1)).is_admin
    assert await users.get_user(store.pool, 2) is None
    assert await set_admin(store.pool, 2, True) is None


async def test_sessions_keep_the_last_outputs_per_chat_and_user(store):
    await upsert_user(store.pool, 1)
    assert await sessions.get_session(store.pool, 10, 1) is None
    outputs = [{"kind": "image", "file_id": "AgAD", "filename": "a.png", "subfolder": "",
                "type": "output", "job_id": 5}]
    await sessions.set_last_outputs(store.pool, 10, 1, outputs)
    first = await sessions.get_session(store.pool, 10, 1)
    assert first.last_outputs == outputs
    await sessions.set_last_outputs(store.pool, 10, 1, [])
    second = await sessions.get_session(store.pool, 10, 1)
    assert second.last_outputs == [] and second.updated_at >= first.updated_at
    assert await sessions.get_session(store.pool, 11, 1) is None


async def test_commands(store):
    seeded = await commands.seed_command(store.pool, "draw", workflow=WORKFLOW, description="Draw")
    assert (seeded.source, seeded.enabled, seeded.workflow) == ("seed", True, WORKFLOW)
    assert await commands.seed_command(store.pool, "draw", workflow=WORKFLOW, description="Draw") is None
    await commands.set_command_enabled(store.pool, "draw", False)
    refreshed = await commands.seed_command(store.pool, "draw", workflow={"1": {}}, description="Draw")
    assert (refreshed.workflow, refreshed.enabled) == ({"1": {}}, False)  # the admin's choice stays

    published = await commands.put_command(store.pool, "draw", workflow=WORKFLOW, owner="42")
    assert (published.source, published.owner, published.enabled) == ("published", "42", False)
    assert await commands.seed_command(store.pool, "draw", workflow={}, description="") is None
    assert (await commands.get_command(store.pool, "draw")).source == "published"

    await commands.put_command(store.pool, "upscale_2x", workflow=WORKFLOW)
    assert [c.name for c in await commands.list_commands(store.pool)] == ["draw", "upscale_2x"]
    assert [c.name for c in await commands.list_commands(store.pool, enabled_only=True)] == ["upscale_2x"]
    assert await commands.delete_command(store.pool, "draw")
    assert not await commands.delete_command(store.pool, "draw")
    assert await commands.get_command(store.pool, "draw") is None
    assert await commands.set_command_enabled(store.pool, "draw", True) is None


@pytest.mark.parametrize("name", ["", "Draw", "draw-it", "x" * 33, "dräw"])
async def test_command_names_are_checked(store, name):
    with pytest.raises(ValueError, match="bad command name"):
        await commands.put_command(store.pool, name, workflow=WORKFLOW)


async def test_database_errors_are_store_errors_with_the_cause(store):
    with pytest.raises(StoreError) as caught:
        await commands.put_command(store.pool, "draw", workflow=["not", "an", "object"])
    assert type(caught.value.__cause__).__name__ == "CheckViolationError"


async def test_backends_are_registered_once_and_keep_their_state(store):
    local, remote = await backends.register_backends(
        store.pool, ["http://127.0.0.1:8188", "http://" + "a" * 56 + ".anon"])
    assert (local.capacity, local.healthy, local.draining, local.models, local.checked_at) == (1, True, False, [], None)
    await backends.set_backend(store.pool, remote.id, draining=True, capacity=3)
    assert not await backends.record_check(store.pool, remote.url, error="SOCKS timeout")  # down: no recovery
    assert not await backends.record_check(store.pool, local.url, models=["a.safetensors"])  # was healthy
    (again,) = await backends.register_backends(store.pool, [remote.url])
    assert (again.id, again.draining, again.capacity, again.healthy, again.last_error) == (
        remote.id, True, 3, False, "SOCKS timeout")
    assert await backends.record_check(store.pool, remote.url)  # recovered; its models kept (none)
    listed = await backends.list_backends(store.pool)
    assert [(b.url, b.healthy, b.models, b.running) for b in listed] == [
        (local.url, True, ["a.safetensors"], 0), (remote.url, True, [], 0)]
    assert listed[1].last_error is None and listed[1].last_seen_at >= listed[1].checked_at
    assert [b.id for b in await backends.list_backends(store.pool, [remote.url])] == [remote.id]
    assert await backends.set_backend(store.pool, 999, draining=True) is None


async def test_benchmark_runs(store):
    first = await benchmarks.add_benchmark_run(
        store.pool, workflow="sdxl", device="cuda:0", wall_s=[1.5, 1.25], warmup=1, host="box",
        comfyui_version="0.3.60", torch_version="2.13.0", stats={"median": 1.375},
        per_node={"3": 1.1}, peak_memory_bytes=2**33, extra={"gpu": "H200"})
    assert (first.repeats, first.wall_s, first.peak_memory_bytes) == (2, [1.5, 1.25], 2**33)
    assert await benchmarks.get_benchmark_run(store.pool, first.id) == first
    second = await benchmarks.add_benchmark_run(store.pool, workflow="flux", device="cpu", wall_s=[9.0])
    assert (second.stats, second.extra, second.host) == ({}, {}, "")
    assert [r.id for r in await benchmarks.list_benchmark_runs(store.pool)] == [second.id, first.id]
    assert [r.id for r in await benchmarks.list_benchmark_runs(store.pool, workflow="sdxl")] == [first.id]
    assert [r.id for r in await benchmarks.list_benchmark_runs(store.pool, limit=1)] == [second.id]
