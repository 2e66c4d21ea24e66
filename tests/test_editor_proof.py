"""The editor gate without ComfyUI: what proves a send_to_chat, and that every doubt sends nothing; and who
may receive what it proves, asked of real PostgreSQL when the node sends."""

import copy
import secrets
import time

import pytest

from comfyui_courier.bot.access import may_receive
from comfyui_courier.core.config import Settings
from comfyui_courier.jobs.editor_proof import (
    APPROVAL_S,
    NO_CHECK,
    PROOF_KEY,
    VALID_S,
    EditorGate,
    canonical_json,
    js_number,
    sign,
)
from comfyui_courier.store import access, editor_nonces

TOKEN = "admin-token-for-tests"
NOW = 1_700_000_000.0


def graph(chat="4242"):
    return {"1": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 0}},
            "2": {"class_type": "CourierTelegramOutput",
                  "inputs": {"filename_prefix": "courier/x", "images": ["1", 0], "send_to_chat": chat}}}


def body(prompt, proof=None, **extra):
    data = {"prompt": prompt, "client_id": "c", "extra_data": {"extra_pnginfo": {"workflow": {}}}, **extra}
    if proof is not None:
        data["extra_data"][PROOF_KEY] = proof
    return data


def proof_for(prompt, *, token=TOKEN, at=NOW):
    return sign(token, prompt, int(at * 1000), secrets.token_hex(16))


@pytest.fixture
def gate():
    return EditorGate(TOKEN, clock=lambda: NOW)


def judged(gate, data):
    """(the prompt as ComfyUI queues it, (the chat its node may send to, or None; why not))."""
    data = gate.on_prompt(data)
    node = data["prompt"]["2"]["inputs"]
    return data, chat_of(gate.take(data["prompt_id"], "2", node["send_to_chat"], data["prompt"]))


def chat_of(verdict):
    """A ``take``'s (approval, why not) as (the approved chat, why not)."""
    approval, why = verdict
    return approval.chat if approval is not None else None, why


def test_a_valid_proof_lets_the_node_send_once_and_leaves_no_trace_in_the_prompt(gate):
    data, verdict = judged(gate, body(graph(), proof_for(graph())))
    assert verdict == (4242, None)
    assert PROOF_KEY not in data["extra_data"]  # never in /history or /queue
    assert data["prompt"]["2"]["inputs"]["send_to_chat"] == "4242"
    assert gate.take(data["prompt_id"], "2", "4242", data["prompt"]) == (None, NO_CHECK)  # one approval, one take


@pytest.mark.parametrize("case,reason", [
    ("none", "no proof of the editor"),
    ("stale", "more than 300 s old"),
    ("future", "more than 300 s old"),
    ("other graph", "for another graph or chat"),
    ("other chat", "for another graph or chat"),
    ("other token", "for another graph or chat"),
    ("malformed", "malformed"),
    ("linked", "typed into the node, not linked"),
])
def test_any_doubt_blanks_the_chat_and_the_node_says_why(gate, case, reason):
    prompt = graph()
    proof = {"none": None, "stale": proof_for(prompt, at=NOW - VALID_S - 1),
             "future": proof_for(prompt, at=NOW + VALID_S + 1),
             "other graph": proof_for(graph() | {"3": {"class_type": "X", "inputs": {}}}),
             "other chat": proof_for(graph("7")), "other token": proof_for(prompt, token="guess"),
             "malformed": {"ts": "now", "nonce": "x", "mac": ""}}.get(case)
    if case == "linked":
        prompt = graph(["1", 0])
        proof = proof_for(prompt)
    data, (chat, why) = judged(gate, body(prompt, proof))
    assert chat is None and reason in why
    assert data["prompt"]["2"]["inputs"]["send_to_chat"] == ""


def test_a_replayed_proof_sends_nothing(gate):
    prompt = graph()
    proof = proof_for(prompt)
    assert judged(gate, body(copy.deepcopy(prompt), dict(proof)))[1] == (4242, None)
    _, (chat, why) = judged(gate, body(copy.deepcopy(prompt), dict(proof)))
    assert chat is None and "already used" in why


def test_without_an_admin_token_nothing_is_ever_approved():
    gate = EditorGate("", clock=lambda: NOW)
    _, (chat, why) = judged(gate, body(graph(), proof_for(graph(), token="")))
    assert chat is None and "COURIER_ADMIN_TOKEN is not set" in why


@pytest.mark.parametrize("chat", ["99", "-100"])
def test_the_gate_proves_the_editor_and_leaves_the_recipient_to_the_send(gate, chat):
    assert judged(gate, body(graph(chat), proof_for(graph(chat))))[1] == (int(chat), None)  # may_receive decides


def test_the_node_fails_closed_when_the_gate_never_saw_the_prompt(gate):
    assert gate.take("never-queued", "2", "4242", graph()) == (None, NO_CHECK)
    assert gate.take("never-queued", "2", "", graph()) == (None, None)  # nothing asked, nothing said


def test_an_approval_is_for_its_graph_only(gate):
    gate.on_prompt(body(graph(), proof_for(graph()), prompt_id="p1"))
    other = graph() | {"3": {"class_type": "X", "inputs": {}}}  # same prompt id, another graph
    assert gate.take("p1", "2", "4242", other) == (None, NO_CHECK)


def test_a_graph_json_cannot_hold_takes_nothing_and_raises_nothing(gate):
    """A bot job's graph may carry a NaN (ComfyUI takes one; JSON has none): with no chat it is never hashed."""
    prompt = graph("")
    prompt["1"]["inputs"]["color"] = float("nan")
    gate.on_prompt(body(graph(), proof_for(graph()), prompt_id="p1"))
    assert gate.take("p1", "2", "", prompt) == (None, None)
    assert gate.take("p2", "2", "", prompt) == (None, None)


@pytest.mark.parametrize("chat", ["4242", ""])
def test_a_prompt_reusing_an_approved_id_leaves_the_approval_to_the_approved_prompt(gate, chat):
    """An unproved prompt with the approved prompt's id, run first (queued in front): it sends nothing and
    says why, and the admin's prompt still sends (its approval was taken by whichever prompt ran first)."""
    approved = gate.on_prompt(body(graph(), proof_for(graph()), prompt_id="p1"))
    other = graph(chat) | {"3": {"class_type": "X", "inputs": {}}}
    queued = gate.on_prompt(body(other, prompt_id="p1"))["prompt"]
    taken, why = gate.take("p1", "2", queued["2"]["inputs"]["send_to_chat"], queued)
    assert taken is None and (("no proof of the editor" in why) if chat else why is None)
    approval, why = gate.take("p1", "2", "4242", approved["prompt"])
    assert why is None and approval.chat == 4242 and approval.node_id == "2"


def test_the_gate_never_raises(gate, caplog):
    deep = graph()
    deep["2"]["inputs"]["deep"] = nested = []
    for _ in range(5000):
        nested.append([])
        nested = nested[0]
    data = gate.on_prompt(body(deep, proof_for(graph())))
    assert data["prompt"]["2"]["inputs"]["send_to_chat"] == ""
    assert gate.on_prompt("not a dict") == "not a dict"
    assert gate.on_prompt({"prompt": None}) == {"prompt": None}


def test_prompts_without_a_chat_pass_untouched(gate):
    prompt = graph("")
    data = gate.on_prompt(body(prompt))
    assert data == body(graph(""))


@pytest.mark.parametrize("number,text", [(0.1, "0.1"), (1e-7, "1e-7"), (1e-6, "0.000001"), (1e21, "1e+21"),
                                         (1e20, "100000000000000000000"), (-2.5e-10, "-2.5e-10"), (100.0, "100"),
                                         (1.7976931348623157e308, "1.7976931348623157e+308"), (5e-324, "5e-324")])
def test_numbers_are_written_as_javascript_writes_them(number, text):
    assert js_number(number) == text


def test_canonical_json_sorts_keys_and_keeps_text():
    assert canonical_json({"b": [1, 2.5, "ü\n"], "a": None, "c": True}) == '{"a":null,"b":[1,2.5,"ü\\n"],"c":true}'


ADMIN, USER, ALLOWED, STORED_ADMIN, NAMED, STRANGER = 1, 4242, 7, 8, 9, 99


async def users(store) -> list[int]:
    async with store.pool.acquire() as conn:
        return [row["user_id"] for row in await conn.fetch("SELECT user_id FROM courier_users ORDER BY user_id")]


async def make_owner(pool, user_id: int) -> None:
    """``user_id`` made the first admin with the console's one-time code."""
    assert await access.add_owner_code(pool, "owner-code") and await access.claim_owner(pool, user_id, "owner-code")


async def test_renders_go_to_whom_the_bot_lets_in_as_postgresql_and_the_settings_say(store):
    settings = Settings(admin_users=[ADMIN], allowed_users=[USER, "@named"])
    pool = store.pool
    await make_owner(pool, STORED_ADMIN)
    await access.set_allowed(pool, ALLOWED, True)  # /allow
    await access.admit(pool, NAMED, "named", [], ["named"], False)  # @named is bound to the id it came with
    for user in (ADMIN, USER, ALLOWED, STORED_ADMIN, NAMED):
        assert await may_receive(pool, settings, user), user
    before = await users(store)
    for chat in (STRANGER, -100, -USER, 0, 2**64):  # a stranger, groups, no PostgreSQL bigint
        assert not await may_receive(pool, settings, chat), chat
    assert await users(store) == before  # asking writes no row for a stranger
    assert await may_receive(pool, Settings(allowed_users=["*"]), STRANGER) and await users(store) == before


async def test_a_banned_user_receives_nothing_but_admins_are_never_banned(store):
    settings = Settings(admin_users=[ADMIN], allowed_users=[USER])
    pool = store.pool
    await make_owner(pool, STORED_ADMIN)
    await access.set_allowed(pool, ALLOWED, True)
    for user in (ADMIN, USER, ALLOWED, STORED_ADMIN, STRANGER):
        await access.set_banned(pool, user, True)
    assert not await may_receive(pool, settings, USER)  # allowed in the settings, banned in PostgreSQL
    assert not await may_receive(pool, settings, ALLOWED)
    assert not await may_receive(pool, Settings(allowed_users=["*"]), STRANGER)
    assert await may_receive(pool, settings, ADMIN) and await may_receive(pool, settings, STORED_ADMIN)


async def test_a_proof_sends_once_across_backends_and_restarts(store):
    """Two gates stand for two backends with one admin token (or one before and one after a restart): each
    approves the proof in its own memory, and PostgreSQL lets only the first send."""
    prompt = graph()
    proof = proof_for(prompt, at=time.time())
    approvals = []
    for _ in range(2):
        gate = EditorGate(TOKEN)
        data = gate.on_prompt(body(copy.deepcopy(prompt), dict(proof)))
        approval, why = gate.take(data["prompt_id"], "2", "4242", data["prompt"])
        assert why is None
        approvals.append(approval)
    first, second = approvals
    assert first.nonce == second.nonce == proof["nonce"] and first.until >= time.time() + APPROVAL_S
    assert await editor_nonces.spend(store.pool, first.nonce, first.node_id, first.until)
    assert not await editor_nonces.spend(store.pool, second.nonce, second.node_id, second.until)
    assert await editor_nonces.spend(store.pool, first.nonce, "5", first.until)  # its graph's other output node


async def test_spent_nonces_are_kept_until_they_expire_and_then_dropped(store):
    assert await editor_nonces.spend(store.pool, "a" * 32, "2", time.time() - 1)  # expired (a clock's view)
    assert await editor_nonces.spend(store.pool, "b" * 32, "2", time.time() + 600)
    async with store.pool.acquire() as conn:
        assert [r["nonce"] for r in await conn.fetch("SELECT nonce FROM courier_editor_nonces")] == ["b" * 32]
