"""The editor gate without ComfyUI: what proves a send_to_chat, and that every doubt sends nothing."""

import copy
import secrets

import pytest
from comfyui_courier.editor_proof import (
    NO_CHECK,
    PROOF_KEY,
    VALID_S,
    EditorGate,
    canonical_json,
    js_number,
    sign,
)

TOKEN = "admin-token-for-tests"
NOW = 1_700_000_000.0
ALLOWED = {4242, 7}


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
    return EditorGate(TOKEN, ALLOWED.__contains__, clock=lambda: NOW)


def judged(gate, data):
    """(the prompt as ComfyUI queues it, what the node of it takes from the gate)."""
    data = gate.on_prompt(data)
    node = data["prompt"]["2"]["inputs"]
    return data, gate.take(data["prompt_id"], "2", node["send_to_chat"], data["prompt"])


def test_a_valid_proof_lets_the_node_send_once_and_leaves_no_trace_in_the_prompt(gate):
    data, verdict = judged(gate, body(graph(), proof_for(graph())))
    assert verdict == (4242, None)
    assert PROOF_KEY not in data["extra_data"]  # never in /history or /queue
    assert data["prompt"]["2"]["inputs"]["send_to_chat"] == "4242"
    assert gate.take(data["prompt_id"], "2", "4242", data["prompt"]) == (None, NO_CHECK)  # one approval, one send


@pytest.mark.parametrize("case,reason", [
    ("none", "no proof of the editor"),
    ("stale", "more than 300 s old"),
    ("future", "more than 300 s old"),
    ("other graph", "for another graph or chat"),
    ("other chat", "for another graph or chat"),
    ("other token", "for another graph or chat"),
    ("malformed", "malformed"),
    ("not allowed", "chat 99 is not an allowed user"),
    ("group", "chat -100 is not an allowed user"),
    ("linked", "typed into the node, not linked"),
])
def test_any_doubt_blanks_the_chat_and_the_node_says_why(gate, case, reason):
    prompt = graph()
    proof = {"none": None, "stale": proof_for(prompt, at=NOW - VALID_S - 1),
             "future": proof_for(prompt, at=NOW + VALID_S + 1),
             "other graph": proof_for(graph() | {"3": {"class_type": "X", "inputs": {}}}),
             "other chat": proof_for(graph("7")), "other token": proof_for(prompt, token="guess"),
             "malformed": {"ts": "now", "nonce": "x", "mac": ""}}.get(case)
    if case in ("not allowed", "group"):
        prompt = graph("99" if case == "not allowed" else "-100")
        proof = proof_for(prompt)
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
    gate = EditorGate("", ALLOWED.__contains__, clock=lambda: NOW)
    _, (chat, why) = judged(gate, body(graph(), proof_for(graph(), token="")))
    assert chat is None and "COURIER_ADMIN_TOKEN is not set" in why


def test_the_node_fails_closed_when_the_gate_never_saw_the_prompt(gate):
    assert gate.take("never-queued", "2", "4242", graph()) == (None, NO_CHECK)
    assert gate.take("never-queued", "2", "", graph()) == (None, None)  # nothing asked, nothing said


def test_an_approval_is_for_its_graph_only(gate):
    gate.on_prompt(body(graph(), proof_for(graph()), prompt_id="p1"))
    other = graph() | {"3": {"class_type": "X", "inputs": {}}}  # same prompt id, another graph
    assert gate.take("p1", "2", "4242", other) == (None, NO_CHECK)


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
