"""Every /courier route body and query, generated (hypothesis): no 500, every error is JSON.

The routes run on a bare aiohttp app against real PostgreSQL (conftest.py); the bench and
webhook routes against a started Courier whose bot talks to the Bot API emulator. Whatever
arrives -- any JSON value, wrong types, huge, NUL, unpaired-surrogate or other odd text, raw
bytes -- the answer is a success or ``{"error": {"code", "message"}}`` with a 4xx status (a
5xx only where the server itself lacks something: no bot, Telegram failing).
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from aiohttp import ClientSession
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from yarl import URL

from comfyui_courier.tests.server_routes import helpers
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI

EXAMPLES = settings(max_examples=500, deadline=None, database=None,  # no .hypothesis folder in the pack
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
SERVER_SIDE = {(503, "no_bot"), (503, "no_node_list"), (502, "telegram_error")}
ADMIN = 5150

ODD = st.sampled_from(["\x00", "\ud800", "\udfff", "\u200b", "\u202e", "\ufeff", "\x1b", "\n", "/", "@", "%",
                       "\U0001f600", "é", "demo", "mycmd", " "])
SHORT_TEXT = st.lists(st.one_of(st.text(max_size=8), ODD), max_size=8).map("".join)
HUGE_TEXT = st.builds(lambda part, n: part * n, ODD | st.text(min_size=1, max_size=3), st.integers(100, 5000))
TEXT = st.one_of(st.text(max_size=12), SHORT_TEXT, HUGE_TEXT)
NAMES = st.from_regex(r"[a-z0-9_]{1,32}", fullmatch=True) | st.sampled_from(["mycmd", "demo", "start", "/mycmd"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=12)


def mostly(right: st.SearchStrategy) -> st.SearchStrategy:
    """``right`` three times in four, else any JSON value."""
    return st.one_of(right, right, right, JSON)


def graphs():
    """Editor graphs: the weight-free one, with a part replaced, or any JSON at all."""
    def mutate(graph, node, name, value):
        graph[node]["inputs"][name] = value
        return graph

    demo = st.builds(helpers.demo_graph, mostly(NAMES | TEXT))
    return st.one_of(demo, st.builds(mutate, demo, st.just("1"), st.sampled_from(["prompt", "image"]), TEXT),
                     st.builds(mutate, demo, st.sampled_from(["1", "2", "3"]), TEXT, JSON),
                     st.builds(lambda graph, node, value: {**graph, node: value}, demo, TEXT, JSON), JSON)


def body_of(fields: dict, required: tuple[str, ...] = ()) -> st.SearchStrategy:
    """Objects with ``required`` and some of ``fields`` (mostly right, else any JSON), sometimes an
    unknown member; or any JSON value."""
    members = st.fixed_dictionaries({name: mostly(fields[name]) for name in required},
                                    optional={name: mostly(s) for name, s in fields.items() if name not in required})
    extra = st.dictionaries(TEXT, JSON, min_size=1, max_size=2)
    return st.one_of(members, members, members, st.builds(lambda a, b: {**a, **b}, members, extra), JSON)


def encoded(body) -> bytes:
    return json.dumps(body).encode()  # ensure_ascii: unpaired surrogates travel as \ud800


RAW = st.one_of(st.builds(encoded, JSON), st.binary(max_size=64),
                st.sampled_from([b"", b"{", b"NaN", b'{"a": Infinity}', b"[" * 100_000, b'"\\u0000"',
                                 b'{"workflow": "\xff"}']))


def assert_answered(status: int, reply) -> None:
    """A success, or the one error shape with a 4xx status (or a known server-side 5xx)."""
    assert status != 500, reply
    if status < 400:
        event(str(status))  # --hypothesis-show-statistics: how often each answer came
        return
    assert isinstance(reply, dict) and set(reply) == {"error"}, reply
    error = reply["error"]
    assert set(error) == {"code", "message"} and isinstance(error["code"], str), reply
    assert isinstance(error["message"], str) and error["message"], reply
    assert status < 500 or (status, error["code"]) in SERVER_SIDE, (status, reply)
    event(f"{status} {error['code']}")


async def send(api, method: str, path: str | URL, data: bytes, headers: dict | None = None, **kwargs):
    return await api.send(method, path, data=data, headers={"Content-Type": "application/json", **(headers or {})},
                          **kwargs)


def quoted(text: str) -> str:
    """``text`` percent-encoded byte for byte (an unpaired surrogate as its would-be UTF-8)."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def command_url(api, name: str, tail: str = "") -> URL:
    return URL(f"{api.url}/courier/commands/{quoted(name)}{tail}", encoded=True)


NAME = (NAMES | TEXT).filter(lambda name: name and "/" not in name)  # else another path


async def publish_mycmd(api) -> None:
    """The command most generated names hit: /mycmd, published anew for each example."""
    status, reply, _ = await api.send("POST", "/courier/commands", json={"workflow": helpers.demo_graph(),
                                                                         "replace": True})
    assert status in (200, 201), reply
MAX_URL = 8000  # aiohttp refuses a longer request line (8190 bytes) before any route sees it


PUBLISH = body_of({"workflow": graphs(), "name": NAMES | TEXT, "description": TEXT, "owner": TEXT,
                   "replace": st.booleans()}, required=("workflow",))


@EXAMPLES
@given(body=PUBLISH)
async def test_publishing_any_body(api, body):
    status, reply, _ = await send(api, "POST", "/courier/commands", encoded(body))
    assert_answered(status, reply)
    if status in (200, 201):
        assert reply["command"]["name"] and isinstance(reply["menu_updated"], bool)


@EXAMPLES
@given(data=RAW)
async def test_publishing_any_bytes(api, data):
    status, reply, _ = await send(api, "POST", "/courier/commands", data)
    assert_answered(status, reply)


@EXAMPLES
@given(name=NAME, body=body_of({"enabled": st.booleans()}, required=("enabled",)),
       method=st.sampled_from(["PATCH", "DELETE"]))
async def test_changing_a_command_of_any_name(api, name, body, method):
    url = command_url(api, name)
    assume(len(str(url)) < MAX_URL)
    await publish_mycmd(api)
    status, reply, _ = await send(api, method, url, encoded(body))
    assert_answered(status, reply)


@EXAMPLES
@given(name=NAME)
async def test_exporting_a_command_of_any_name(api, name):
    url = command_url(api, name, "/export")
    assume(len(str(url)) < MAX_URL)
    await publish_mycmd(api)
    status, reply, _ = await api.get(url)
    assert_answered(status, reply)


KNOWN_KEYS = st.sampled_from(["old", "new", "workflow", "statistic", "limit", "user_id"])
KNOWN_VALUES = st.sampled_from(["cpu", "cpu@box", "median", "1", "-1", "201", "demo"])
QUERY = st.lists(st.tuples(st.one_of(KNOWN_KEYS, KNOWN_KEYS, SHORT_TEXT), st.one_of(KNOWN_VALUES, SHORT_TEXT, TEXT)),
                 max_size=5)


@pytest.mark.parametrize("path", ["/courier/benchmarks/compare", "/courier/benchmarks/compare.png",
                                  "/courier/benchmarks", "/courier/jobs", "/courier/sessions", "/courier/commands"])
@EXAMPLES
@given(query=QUERY)
async def test_reading_with_any_query(api, path, query):
    query_string = "&".join(f"{quoted(name)}={quoted(value)}" for name, value in query)
    url = URL(f"{api.url}{path}?{query_string}", encoded=True)
    assume(len(str(url)) < MAX_URL)
    status, reply, _ = await api.get(url)
    assert_answered(status, reply)


@pytest.fixture
async def bot_api(courier_api, botapi, botapi_bot, pg_database, tmp_path):
    """The routes of a started Courier whose admin has a chat with the bot."""
    botapi_bot.inject_text(ADMIN, "/start")
    async with FakeComfyUI() as comfy, running_courier(
            botapi, botapi_bot, pg_database, comfy.url, tmp_path, COURIER_ADMIN_TOKEN=helpers.TOKEN,
            COURIER_ADMIN_USERS=str(ADMIN), COURIER_ALLOWED_USERS=str(ADMIN)) as courier:
        yield await courier_api(courier=courier)


BENCH = body_of({"command": st.sampled_from(["demo", "/demo", "demoedit"]) | TEXT,
                 "repeats": st.integers(-3, 12) | st.integers(), "chat_id": st.just(ADMIN) | st.integers()},
                required=("command", "chat_id"))


@EXAMPLES
@given(body=BENCH)
async def test_benchmark_run_with_any_body(bot_api, body):
    status, reply, _ = await send(bot_api, "POST", "/courier/benchmarks/run", encoded(body))
    assert_answered(status, reply)
    if status == 202:
        assert isinstance(reply["job_id"], int)


USER = st.fixed_dictionaries({"id": st.integers(), "is_bot": st.booleans() | JSON, "first_name": TEXT | JSON})
MESSAGE = st.fixed_dictionaries({}, optional={
    "message_id": st.integers() | JSON, "date": st.integers(0, 2**31) | JSON, "text": TEXT | JSON, "from": USER | JSON,
    "chat": st.fixed_dictionaries({"id": st.integers(), "type": st.sampled_from(["private", "group", "channel"])})
    | JSON})
UPDATE = st.builds(lambda update_id, kind, message, rest: {**rest, "update_id": update_id, kind: message},
                   st.integers() | JSON, st.sampled_from(["message", "edited_message", "channel_post",
                                                          "callback_query"]) | TEXT, MESSAGE | JSON,
                   st.dictionaries(TEXT, JSON, max_size=2))


@pytest.fixture
async def webhook_api(webhook_courier):
    courier, url = webhook_courier
    async with ClientSession(trust_env=False) as http:
        yield helpers.Api(url, courier, http)


@EXAMPLES
@given(data=st.one_of(RAW, st.builds(encoded, UPDATE)))
async def test_webhook_with_any_body(webhook_api, data):
    """Updates from strangers (never the admin): the bot answers them, the route only hands them on."""
    status, reply, _ = await send(webhook_api, "POST", "/courier/telegram/webhook", data, token=None,
                                  headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret-token"})
    assert_answered(status, reply)
