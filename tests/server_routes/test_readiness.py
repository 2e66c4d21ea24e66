"""GET /courier/readiness against real PostgreSQL: each command ready or not on each backend, per the
models its health check recorded, with the files it lacks and where to download them."""

from comfyui_courier.jobs.seed import seed_commands, seed_manifest
from comfyui_courier.store import backends

FULL, PARTIAL, UNCHECKED = "http://127.0.0.1:9101", "http://user:pw@127.0.0.1:9102", "http://127.0.0.1:9103"
MANIFEST = seed_manifest()


def names(command: str) -> list[str]:
    return [model["name"] for model in MANIFEST[command]["models"]]


async def test_readiness_per_backend(courier_api, store):
    await seed_commands(store)
    await backends.register_backends(store.pool, [FULL, PARTIAL, UNCHECKED])
    await backends.record_check(store.pool, FULL, models=sorted({*names("f"), *names("qwen"), "mine.safetensors"}))
    await backends.record_check(store.pool, PARTIAL, models=names("f")[1:])
    api = await courier_api({"COURIER_BACKENDS": f"{FULL}/,{PARTIAL},{UNCHECKED}"}, store=store)

    status, reply, _ = await api.get("/courier/readiness", token=None)

    assert status == 200, reply
    assert reply["backends"] == [FULL, "http://127.0.0.1:9102", UNCHECKED]  # credentials left out
    assert "pw" not in str(reply)
    by_name = {command["name"]: command for command in reply["commands"]}
    assert by_name.keys() == MANIFEST.keys()
    ready = {name: [b["ready"] for b in command["backends"]] for name, command in by_name.items()}
    assert ready["f"] == [True, False, None]
    assert ready["qwen"] == [True, False, None]
    assert ready["wan"] == [False, False, None]
    assert ready["demo"] == [True, True, None] and by_name["demo"]["files"] == []
    flux = by_name["f"]
    assert {f["name"]: f["url"] for f in flux["files"]} == {m["name"]: m["url"] for m in MANIFEST["f"]["models"]}
    first = MANIFEST["f"]["models"][0]
    assert flux["backends"][1]["missing"] == [{"name": first["name"], "folder": first["folder"], "url": first["url"]}]
    assert len(by_name["qwen"]["backends"][1]["missing"]) == 4 and by_name["qwen"]["backends"][0]["missing"] == []

