"""Proof that a prompt's ``send_to_chat`` comes from the graph editor of someone holding the admin token.

Anyone who can reach ComfyUI can queue a prompt (a local user, a web page by DNS rebinding, a
hidden-service client), so Telegram Output sends to a chat only on proof. The editor's extension
(``js/courier/proof.js``) adds ``extra_data.courier_editor = {ts, nonce, mac}`` to each prompt it
queues with a chat: ``mac`` is HMAC-SHA256, keyed by ``COURIER_ADMIN_TOKEN``, over the chats, the
prompt's canonical hash, the timestamp (ms) and the nonce. ``EditorGate.on_prompt``, a PromptServer
on-prompt handler, takes the proof out (it never reaches ``/history``), checks it (``VALID_S``, one
use in this process, chats typed into the node) and records the approval by (prompt id, node id); on
any doubt it blanks ``send_to_chat`` and records why. The node sends only what it can ``take`` from
the gate, for the very graph and chat approved (a prompt that reuses an approved prompt's id, with
another graph, takes nothing and leaves the approval to its own prompt): a prompt the gate did not
approve -- another way in, an error in the gate -- sends nothing. As it sends, on the server's loop,
the node spends the proof's nonce in PostgreSQL (``store.editor_nonces``: one use on every backend
of the database and across restarts, which the gate's memory cannot see) and asks whether the chat
may receive the render (an allowed user or admin of the bot, as PostgreSQL and the settings say:
``bot.access.may_receive``): the gate runs synchronously, where the database cannot be asked.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

from ..core.logs import get_logger

log = get_logger("editor")

OUTPUT_NODE = "CourierTelegramOutput"
PROOF_KEY = "courier_editor"
CONTEXT = "courier-editor-v1"
VALID_S = 300.0  # a proof is good this long either side of the server's clock, once
APPROVAL_S = 86400.0  # an approved prompt may wait in the queue this long
MAX_REFUSALS = 1024  # reasons kept for the nodes to show; strangers' prompts cannot grow it further

CHAT_ID = re.compile(r"-?[0-9]{1,20}")
NO_CHECK = "this prompt did not pass Courier's editor check"


class Note(NamedTuple):
    chat: str  # "" for a refusal
    graph: str
    reason: str
    expires: float
    nonce: str = ""  # an approval's proof


class Approval(NamedTuple):
    """What the gate approved for one Telegram Output node: the chat it may send to, once its proof's
    nonce is spent (``store.editor_nonces.spend``, kept until ``until``, epoch seconds: past it no
    backend approves that proof, nor runs a prompt it approved)."""

    chat: int
    node_id: str
    nonce: str
    until: float


def canonical_json(value: Any) -> str:
    """``value`` as JavaScript's JSON.stringify writes it with sorted keys (js/courier/proof.js does the same)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{canonical_json(value[k])}"
                              for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, float):
        return js_number(value)
    return json.dumps(value, ensure_ascii=False)


def js_number(x: float) -> str:
    """ECMAScript's Number::toString of a finite double (Python's repr differs in when it uses exponents)."""
    if not math.isfinite(x):
        raise ValueError("not a JSON number")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exponent = repr(abs(x)).partition("e")  # the shortest digits that round-trip, as in JS
    whole, _, fraction = mantissa.partition(".")
    raw = whole + fraction
    stripped = raw.lstrip("0")
    n = len(whole) + int(exponent or 0) - (len(raw) - len(stripped))  # value = 0.<digits> * 10**n
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        out = "0." + "0" * -n + digits
    else:
        e = n - 1
        out = digits[0] + (f".{digits[1:]}" if k > 1 else "") + ("e+" if e >= 0 else "e-") + str(abs(e))
    return sign + out


def graph_hash(prompt: Any) -> str:
    return hashlib.sha256(canonical_json(prompt).encode("utf-8")).hexdigest()


def message(chats: list[str], graph: str, ts: int, nonce: str) -> bytes:
    return "\n".join([CONTEXT, ",".join(chats), graph, str(ts), nonce]).encode("utf-8")


def sign(token: str, prompt: dict, ts: int, nonce: str) -> dict[str, Any]:
    """The proof the editor's extension adds (the same computation, in Python, for tests and tools)."""
    chats = sorted({chat for chat in targets(prompt).values() if isinstance(chat, str)})
    mac = hmac.new(token.encode("utf-8"), message(chats, graph_hash(prompt), ts, nonce), hashlib.sha256)
    return {"ts": ts, "nonce": nonce, "mac": mac.hexdigest()}


def targets(prompt: dict) -> dict[str, Any]:
    """Telegram Output node id -> its ``send_to_chat`` where one is set (a chat id, or a link); a value that
    is no chat id is left to the node's validation, which refuses the prompt."""
    found = {}
    for node_id, node in prompt.items():
        if isinstance(node, dict) and node.get("class_type") == OUTPUT_NODE and isinstance(node.get("inputs"), dict):
            value = node["inputs"].get("send_to_chat")
            if value is not None and (not isinstance(value, str) or CHAT_ID.fullmatch(value.strip())):
                found[str(node_id)] = value.strip() if isinstance(value, str) else value
    return found


class EditorGate:
    """Judges prompts as ComfyUI takes them (``on_prompt``); Telegram Output asks it (``take``)."""

    def __init__(self, admin_token: str, clock: Callable[[], float] = time.time):
        self._token = admin_token
        self._clock = clock
        self._lock = threading.Lock()  # on_prompt runs on the loop, take on ComfyUI's worker thread
        self._nonces: dict[str, float] = {}
        self._approved: dict[tuple[str, str], Note] = {}
        self._refused: OrderedDict[tuple[str, str], Note] = OrderedDict()

    def on_prompt(self, json_data: Any) -> Any:
        """ComfyUI's on-prompt handler: never raises (ComfyUI would go on with the prompt untouched)."""
        try:
            self._judge(json_data)
        except Exception:
            log.exception("the editor check failed; send_to_chat is ignored for this prompt")
            with contextlib.suppress(Exception):  # the node sends nothing without an approval anyway
                for node_id in targets(json_data["prompt"]):
                    json_data["prompt"][node_id]["inputs"]["send_to_chat"] = ""
        return json_data

    def _judge(self, json_data: Any) -> None:
        if not isinstance(json_data, dict) or not isinstance(json_data.get("prompt"), dict):
            return
        extra = json_data.get("extra_data")
        proof = extra.pop(PROOF_KEY, None) if isinstance(extra, dict) else None
        prompt = json_data["prompt"]
        wanted = targets(prompt)
        if not wanted:
            return
        prompt_id = str(json_data.setdefault("prompt_id", str(uuid.uuid4())))
        now = self._clock()
        graph = graph_hash(prompt)
        reason = self._refusal(proof, wanted, graph, now)
        with self._lock:
            self._expire(now)
            if reason is None:
                self._nonces[proof["nonce"]] = now + 2 * VALID_S
                for node_id, chat in wanted.items():
                    self._approved[(prompt_id, node_id)] = Note(chat, graph, "", now + APPROVAL_S, proof["nonce"])
                return
            for node_id in wanted:
                prompt[node_id]["inputs"]["send_to_chat"] = ""
                self._refused[(prompt_id, node_id)] = Note("", graph, reason, now + APPROVAL_S)
                self._refused.move_to_end((prompt_id, node_id))
            while len(self._refused) > MAX_REFUSALS:
                self._refused.popitem(last=False)
        log.warning("prompt %s: send_to_chat ignored: %s", prompt_id, reason)

    def _refusal(self, proof: Any, wanted: dict[str, Any], graph: str, now: float) -> str | None:
        """Why ``proof`` does not let this prompt send; None when it does."""
        if not self._token:
            return "COURIER_ADMIN_TOKEN is not set, so no editor can prove itself"
        if proof is None:
            return ("the prompt carries no proof of the editor "
                    "(queue it from the editor with the admin token set in the Courier panel)")
        if not (isinstance(proof, dict) and isinstance(proof.get("ts"), int) and not isinstance(proof["ts"], bool)
                and isinstance(proof.get("nonce"), str) and 16 <= len(proof["nonce"]) <= 64
                and isinstance(proof.get("mac"), str)):
            return "the editor's proof is malformed"
        if any(not isinstance(chat, str) for chat in wanted.values()):
            return "send_to_chat must be typed into the node, not linked"
        if abs(now - proof["ts"] / 1000) > VALID_S:
            return f"the editor's proof is more than {VALID_S:.0f} s old (or the browser's clock is off)"
        chats = sorted(set(wanted.values()))
        expected = hmac.new(self._token.encode("utf-8"), message(chats, graph, proof["ts"], proof["nonce"]),
                            hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, proof["mac"].lower()):
            return "the editor's proof is for another graph or chat, or made with another admin token"
        with self._lock:
            if proof["nonce"] in self._nonces:
                return "the editor's proof was already used"
        return None

    def take(self, prompt_id: str, node_id: str, send_to_chat: str,
             prompt: Any) -> tuple[Approval | None, str | None]:
        """(what this node of this prompt may send, or None; why not, or None if it was not asked).

        Only the approved graph and chat take the approval: another prompt queued with its id (ahead
        of it, say) leaves it to the approved one."""
        key, chat = (prompt_id, node_id), send_to_chat.strip()
        with self._lock:  # hashed only for a candidate: another graph may hold what JSON cannot (a NaN)
            approved = self._approved.get(key)
            if approved is not None and approved.chat == chat and approved.graph == graph_hash(prompt):
                del self._approved[key]
                return Approval(int(chat), node_id, approved.nonce, spent_until(approved)), None
            refused = self._refused.pop(key, None)
        if refused is not None:
            return None, refused.reason
        return None, NO_CHECK if chat else None

    def _expire(self, now: float) -> None:
        for key in [k for k, until in self._nonces.items() if until < now]:
            del self._nonces[key]
        for notes in (self._approved, self._refused):
            for key in [k for k, note in notes.items() if note.expires < now]:
                del notes[key]


def spent_until(approved: Note) -> float:
    """Until when an approval's nonce is kept spent: another backend may approve a copy of its proof
    until ``VALID_S`` after the proof's time, and run it until ``APPROVAL_S`` after that; this
    approval was made at least ``VALID_S`` before the proof's time, so its expiry plus twice
    ``VALID_S`` is past every such run."""
    return approved.expires + 2 * VALID_S
