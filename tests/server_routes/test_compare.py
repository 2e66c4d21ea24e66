"""GET /courier/benchmarks/compare[.png]: the seed's table for two devices from stored runs; hostile queries."""

import io

import pytest
from PIL import Image
from yarl import URL

from comfyui_courier.gpu.compare import reference_data
from comfyui_courier.gpu.runs import BenchmarkRun
from comfyui_courier.gpu.storage import save_run

XEON = "Intel(R) Xeon(R) CPU @ 2.20GHz"
H200 = "NVIDIA H200"
PATH = "/courier/benchmarks/compare"


def stored(workflow, device, seconds, host="box"):
    return BenchmarkRun(workflow=workflow, device=device, host=host, comfyui_version="0.3.64", torch_version="2.8",
                        repeats=len(seconds), warmup=1, wall_s=list(seconds),
                        stats={"median": sorted(seconds)[len(seconds) // 2]}, per_node={},
                        peak_memory_bytes=None, extra={"prompt_ids": ["p"]})


@pytest.fixture
async def runs(store):
    for run in (stored("demo", XEON, [2.0, 2.0, 2.0]), stored("demo", H200, [0.5], host="gpu-box"),
                stored("f", XEON, [30.0]), stored("f", H200, [1.2], host="gpu-box"),
                stored("demo", H200, [0.25], host="other-box")):
        await save_run(store.pool, run)


def query(**params) -> str:
    return PATH + "?" + str(URL.build(query=params)).lstrip("?")


async def test_stored_rows_then_the_reference_rows(api, runs):
    status, reply, _ = await api.get(query(old=XEON, new=f"{H200}@gpu-box"))
    assert status == 200, reply
    stored_rows = [r for r in reply["rows"] if not r["reference"]]
    assert sorted((r["workflow"], r["t_old"], r["t_new"], r["speedup_pct"], r["ratio"]) for r in stored_rows) == [
        ("demo", 2.0, 0.5, 75.0, 4.0), ("f", 30.0, 1.2, pytest.approx(96.0), pytest.approx(25.0))]
    assert reply["rows"][:2] == stored_rows  # stored rows first
    published = {w["workflow"]: w["published_speedup_pct"] for w in reference_data()["workflows"]}
    reference_rows = [r for r in reply["rows"] if r["reference"]]
    assert [r["workflow"] for r in reference_rows] == list(published)
    for row in reference_rows:  # the seed's speedup column, from its rounded times
        assert row["speedup_pct"] == pytest.approx(published[row["workflow"]], abs=0.05)
    assert reply["new"] == {"device": H200, "host": "gpu-box", "label": f"{H200} (gpu-box)"}
    assert {s["label"] for s in reply["sides"]} == {XEON + " (box)", H200 + " (gpu-box)", H200 + " (other-box)"}


async def test_a_device_without_host_takes_each_hosts_latest_and_workflow_filters(api, runs):
    status, reply, _ = await api.get(query(old=f"{XEON}@box", new=H200, workflow="demo", statistic="mean"))
    assert status == 200, reply
    assert [(r["workflow"], r["t_new"], r["reference"]) for r in reply["rows"]] == [("demo", 0.25, False)]
    assert reply["statistic"] == "mean" and reply["workflow"] == "demo"


async def test_unknown_devices_give_no_rows_but_the_reference(api, runs):
    status, reply, _ = await api.get(query(old="nothing", new="none@where"))
    assert status == 200 and all(r["reference"] for r in reply["rows"]) and len(reply["rows"]) == 5
    status, reply, _ = await api.get(query(old="a", new="b", workflow="' OR 1=1 --"))
    assert status == 200 and reply["rows"] == []


@pytest.mark.parametrize("raw, message", [
    ("", "'old' is required"),
    ("?old=a", "'new' is required"),
    ("?new=a", "'old' is required"),
    ("?old=&new=b", "'old' is empty"),
    ("?old=%20%20&new=b", "'old' is empty"),
    ("?old=@&new=b", "<device>@<host>"),
    ("?old=@box&new=b", "<device>@<host>"),
    ("?old=gpu@&new=b", "<device>@<host>"),
    ("?old=a%00b&new=b", "control"),
    ("?old=a%0Ab&new=b", "control"),
    ("?old=a&new=%E2%80%AEb", "control"),
    ("?old=" + "x" * 300 + "&new=b", "longer than 256"),
    ("?old=a&new=b&workflow=" + "w" * 300, "longer than 256"),
    ("?old=a&new=b&workflow=", "'workflow' is empty"),
    ("?old=a&old=c&new=b", "give 'old' once"),
    ("?old=a&new=b&statistic=max", "'statistic' must be one of"),
    ("?old=a&new=b&limit=5", "unknown parameter"),
    ("?old[]=a&new=b", "unknown parameter"),
])
async def test_hostile_queries_get_400_with_a_reason(api, runs, raw, message):
    for path in (PATH, PATH + ".png"):
        status, reply, headers = await api.get(URL(api.url + path + raw, encoded=True))
        assert status == 400, (raw, reply)
        assert reply["error"]["code"] == "bad_query" and message in reply["error"]["message"], reply
        assert headers["Content-Type"].startswith("application/json")


async def test_invalid_percent_encoding_is_not_a_server_error(api, runs):
    status, reply, _ = await api.get(URL(api.url + PATH + "?old=%FF%FE&new=%C3", encoded=True))
    assert status in (200, 400) and (status == 400 or reply["rows"]), reply


async def test_the_chart(api, runs):
    status, body, headers = await api.get(query(old=XEON, new=H200 + "@gpu-box").replace(PATH, PATH + ".png"))
    assert status == 200 and headers["Content-Type"] == "image/png" and headers["Cache-Control"] == "no-store"
    image = Image.open(io.BytesIO(body))
    assert image.format == "PNG" and image.width == 960 and image.height > 1000  # stored + reference
    status, body, _ = await api.get(query(old=XEON, new=H200, workflow="demo").replace(PATH, PATH + ".png"))
    assert Image.open(io.BytesIO(body)).height == 540  # no reference row for "demo"


async def test_read_only_access_rules(courier_api, store, runs):
    """Public to a browser on this machine; a proxied caller or a hidden service needs the token."""
    open_api = await courier_api({"COURIER_ADMIN_TOKEN": ""}, store=store)
    status, _, _ = await open_api.get(query(old="a", new="b"), token=None)
    assert status == 200
    status, reply, _ = await open_api.get(query(old="a", new="b"), token=None,
                                          headers={"X-Forwarded-For": "203.0.113.9"})
    assert (status, reply["error"]["code"]) == (403, "admin_token_unset")
    hidden = await courier_api({"COURIER_ANYONE": "1"}, store=store)
    for path in (PATH, PATH + ".png"):
        status, _, _ = await hidden.get(path + "?old=a&new=b", token=None)
        assert status == 401
        status, _, _ = await hidden.get(path + "?old=a&new=b")
        assert status == 200


async def test_without_a_database_the_route_says_so(courier_api):
    api = await courier_api()
    status, reply, _ = await api.get(query(old="a", new="b"))
    assert (status, reply["error"]["code"]) == (503, "database_off")
