"""The gateway's access policy: who may call what through the hidden service (gateway.py proxies).

Onion clients cannot be told apart, so every request must carry a bot-host
credential (``X-Courier-Credential``, provisioned with the client key: see
hidden_service.py); the policy keeps only the credentials' SHA-256 and compares in
constant time. Without one: 403. With one, a request passes when its method and
path are in ``ROUTES`` (also under ``/api/``, as ComfyUI serves every route twice)
and the route's rule says yes -- the access policy is that table, nothing else:

* ``/prompt``: a JSON body of at most ``MAX_PROMPT_BYTES`` with only ``prompt``,
  ``client_id`` and ``prompt_id`` (no ``extra_data``, ``number``, ``front``), nodes
  of the types a Courier bot sends (``node_types``), no ``send_to_chat``, a graph
  ``graph_check`` passes, and a ``prompt_id`` ComfyUI does not know yet (neither in
  its queue nor its history, asked each time: 409 otherwise); the prompt is the
  caller's once ComfyUI accepted it (ownership.py keeps who owns what);
* ``/view``: only a file the caller uploaded or one of its prompts wrote;
  ``/upload/image``: only under ``courier/`` of input/output/temp, and a name the
  caller does not own goes with ``overwrite`` off (ComfyUI then never replaces a
  file, it picks a free name and says which); ``/courier/files/delete``: only the
  caller's files and prompts (the others count as ``refused``);
* ``/history/{id}`` and ``/queue``: only the caller's own prompts, with their graph
  and ``client_id`` but no other ``extra_data``; other callers' are left out;
* ``POST /queue``: only ``delete`` of the caller's own prompts; ``/interrupt``: only
  with the id of one of them; ``/ws``: only with a ``clientId`` no other credential
  used (the first to use one owns it; a bot opens its socket before it queues).

A rule reads the body it checks (gateway_bodies.py: 413 past the rule's limit).
Everything else gets 403 and never reaches ComfyUI -- the editor, ``/userdata``,
other packs' routes such as ComfyUI-Manager's node installation.

The path is judged as ComfyUI will see it (``route``): split on ``/``, each segment
percent-decoded; an empty, ``.`` or ``..`` segment, or one that decodes to a
slash or backslash, is refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import hmac
import json
import re
from collections.abc import Awaitable, Callable, Collection
from urllib.parse import unquote

import aiohttp
from aiohttp import web
from multidict import MultiDictProxy
from yarl import URL

from .gateway_bodies import read_json, read_upload, refuse
from .ownership import FileRef, Ledger

CREDENTIAL_HEADER = "X-Courier-Credential"
MAX_PROMPT_BYTES = 2 * 2**20  # a bot's biggest graph (2,000 nodes, as publishing allows) with its prompt text
MAX_UPLOAD_BYTES = 32 * 2**20  # a job's input picture: Telegram hands bots files of up to 20 MB
MAX_CONTROL_BYTES = 64 * 2**10  # /queue and /interrupt bodies
MAX_DELETE_BYTES = 2 * 2**20  # /courier/files/delete: up to 10,000 files and prompt ids
PROMPT_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")  # a uuid4 (the bot's) or any one path segment of that kind
UPLOAD_FIELDS = ("type", "subfolder", "overwrite")  # what ComfyUI's /upload/image reads beside the image
COURIER_SUBFOLDER = "courier"
FOLDER_TYPES = ("input", "output", "temp")
PROMPT_KEYS = frozenset(("prompt", "client_id", "prompt_id"))
EDITOR_ONLY_INPUT = "send_to_chat"

NodeTypes = Callable[[], Awaitable[Collection[str]]]


def digest(credential: str) -> str:
    """What the backend stores of a bot-host credential: its SHA-256, hex."""
    return hashlib.sha256(credential.encode()).hexdigest()


@dataclasses.dataclass
class Policy:
    """What the gateway knows: the credentials it accepts (digests), who queued what, the node types."""

    credentials: frozenset[str] = frozenset()
    node_types: NodeTypes | None = None  # the types a Courier bot may send; None: no prompt passes
    known_types: frozenset[str] = frozenset()
    graph_check: Callable[[dict], str | None] | None = None  # a graph's inputs judged: a reason to refuse, or None
    owned: Ledger = dataclasses.field(default_factory=Ledger)  # each credential's prompt ids, client ids, files
    queuing: set[str] = dataclasses.field(default_factory=set)  # prompt ids on their way to ComfyUI now

    def caller(self, request: web.Request) -> str | None:
        """The digest of the request's credential when it is one we accept, else None."""
        given = request.headers.get(CREDENTIAL_HEADER)
        if not given:
            return None
        presented = digest(given)
        matched = None
        for known in self.credentials:  # every one compared, in constant time
            if hmac.compare_digest(presented, known):
                matched = known
        return matched

    async def sendable(self, types: set[str]) -> bool:
        """Whether a bot may send nodes of ``types``; an unknown type asks ``node_types`` once more."""
        if types <= self.known_types:
            return True
        if self.node_types is None:
            return False
        self.known_types = frozenset(await self.node_types())
        return types <= self.known_types

    def saw_outputs(self, caller: str, outputs: object) -> None:
        """Remember the files in a prompt's ``outputs`` (node -> {"images": [refs]}) as the caller's."""
        for output in (outputs.values() if isinstance(outputs, dict) else ()):
            for refs in (output.values() if isinstance(output, dict) else ()):
                for ref in (refs if isinstance(refs, list) else ()):
                    if isinstance(ref, dict) and isinstance(ref.get("filename"), str):
                        self.owned.wrote(caller, (ref.get("type", "output"), ref.get("subfolder", ""),
                                                  ref["filename"]))


@dataclasses.dataclass
class Forward:
    """A request the rule let through: its body when the rule read it (a form: built anew), how to rewrite
    (or take note of) a 200 reply, and what to undo once the exchange is over, however it ended."""

    body: bytes | aiohttp.FormData | None = None
    reply: Callable[[bytes], bytes] | None = None
    release: Callable[[], None] | None = None


Rule = Callable[[web.Request, str, Policy], Awaitable["Forward | web.Response"]]


TARGET = web.AppKey("courier_gateway_target", URL)  # the ComfyUI behind the gateway (rules ask it too)
SESSION = web.AppKey("courier_gateway_session", aiohttp.ClientSession)  # to TARGET; gateway.py opens it


def courier_subfolder(subfolder: object) -> bool:
    """Whether ``subfolder`` is ``courier`` or below it, as ComfyUI will join it."""
    if not isinstance(subfolder, str) or "\\" in subfolder:
        return False
    parts = subfolder.split("/")
    return parts[0] == COURIER_SUBFOLDER and not any(p in ("", ".", "..") for p in parts)


def plain_name(filename: object) -> bool:
    return isinstance(filename, str) and filename not in ("", ".", "..") and not any(
        c in filename for c in "/\\\0") and ".." not in filename


def _single(query: MultiDictProxy, *names: str) -> bool:
    return all(len(query.getall(name, [])) <= 1 for name in names)


async def _prompt(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    read = await read_json(request, MAX_PROMPT_BYTES)
    if isinstance(read, web.Response):
        return read
    body, data = read
    if not isinstance(data, dict) or not set(data) <= PROMPT_KEYS:
        return refuse(f"a prompt takes only {', '.join(sorted(PROMPT_KEYS))}")
    graph, client_id, prompt_id = data.get("prompt"), data.get("client_id"), data.get("prompt_id")
    if not isinstance(client_id, str) or not client_id or not isinstance(prompt_id, str) \
            or not PROMPT_ID.fullmatch(prompt_id):
        return refuse("a prompt needs its client_id and a prompt_id of letters, digits, - and _")
    if not isinstance(graph, dict) or not all(
            isinstance(node, dict) and isinstance(node.get("class_type"), str) for node in graph.values()):
        return refuse("not an API-format graph", 400)
    if any(node.get("inputs", {}).get(EDITOR_ONLY_INPUT) not in (None, "") for node in graph.values()
           if isinstance(node.get("inputs"), dict)):
        return refuse(f"{EDITOR_ONLY_INPUT} is for the graph editor only")
    if not await policy.sendable({node["class_type"] for node in graph.values()}):
        return refuse("a node type no Courier command uses")
    if policy.graph_check is not None and (reason := policy.graph_check(graph)) is not None:
        return refuse(reason)
    if not policy.owned.claim_client(client_id, caller):
        return refuse("that client_id belongs to another client")
    if prompt_id in policy.queuing:
        return refuse("that prompt_id is taken: send a new one", 409)
    policy.queuing.add(prompt_id)  # before asking ComfyUI: a second request with this id waits for nobody
    known = None
    try:
        known = await _known(request, prompt_id)
    except (aiohttp.ClientError, OSError, ValueError):
        pass
    finally:
        if known is not False:
            policy.queuing.discard(prompt_id)
    if known is not False:
        return web.Response(status=502, text="ComfyUI is not reachable\n") if known is None else \
            refuse("that prompt_id is taken: send a new one", 409)

    def accepted(raw: bytes) -> bytes:
        try:
            reply = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(reply, dict) and reply.get("prompt_id") == prompt_id:
            policy.owned.accepted(caller, prompt_id)
        return raw

    return Forward(body, reply=accepted, release=functools.partial(policy.queuing.discard, prompt_id))


async def _known(request: web.Request, prompt_id: str) -> bool:
    """Whether ComfyUI knows ``prompt_id`` (in its queue or its history): such an id is someone's.

    :raises aiohttp.ClientError, OSError, ValueError: ComfyUI did not answer both, or not with JSON
    """
    target, session = request.app[TARGET], request.app[SESSION]

    async def ask(path: str) -> object:
        url = URL.build(scheme=target.scheme, host=target.raw_host, port=target.port, path=path, encoded=True)
        async with session.get(url) as reply:
            reply.raise_for_status()
            return json.loads(await reply.read())

    queue, history = await asyncio.gather(ask("/queue"), ask(f"/history/{prompt_id}"))
    queued = [item for items in (queue.values() if isinstance(queue, dict) else ()) if isinstance(items, list)
              for item in items]
    return any(isinstance(item, list) and item[1:2] == [prompt_id] for item in queued) or (
        not isinstance(history, dict) or prompt_id in history)


async def _websocket_rule(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    client_id = request.rel_url.query.get("clientId")
    if not client_id or not _single(request.rel_url.query, "clientId") \
            or not policy.owned.claim_client(client_id, caller):
        return refuse("a websocket needs a clientId of its own")
    return Forward()


async def _view(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    query = request.rel_url.query
    folder, subfolder, name = query.get("type", "output"), query.get("subfolder", ""), query.get("filename")
    if not _single(query, "type", "subfolder", "filename") or folder not in FOLDER_TYPES or not plain_name(name):
        return refuse("view takes one plain filename, subfolder and type")
    if policy.owned.has_file(caller, (folder, subfolder, name)):
        return Forward()
    return refuse("only files you uploaded or your prompts wrote")


async def _upload(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    upload = await read_upload(request, MAX_UPLOAD_BYTES)
    if isinstance(upload, web.Response):
        return upload
    fields = upload.fields
    if any(len(values) > 1 for values in fields.values()) or len(fields.get("image", [])) != 1:
        return refuse("one image, one of each field")
    single = {name: values[0] for name, values in fields.items()}
    folder, subfolder, filename = single.get("type", "input"), single.get("subfolder"), single["image"]
    if folder not in FOLDER_TYPES or not courier_subfolder(subfolder) or not plain_name(filename):
        return refuse("uploads go under courier/ only")
    if not policy.owned.has_file(caller, (folder, subfolder, filename)):
        single["overwrite"] = "false"  # another's file (or the local bot's, the editor's) is never replaced
    form = aiohttp.FormData()
    form.add_field("image", upload.image, filename=filename, content_type=upload.content_type)
    for name in UPLOAD_FIELDS:
        if name in single:
            form.add_field(name, single[name])

    def stored(raw: bytes) -> bytes:  # {"name", "subfolder", "type"}: where ComfyUI put it
        try:
            reply = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(reply, dict) and all(isinstance(reply.get(key), str) for key in ("name", "subfolder", "type")):
            policy.owned.wrote(caller, (reply["type"], reply["subfolder"], reply["name"]))
        return raw

    return Forward(form, reply=stored)


def _own_item(item: object, caller: str, policy: Policy) -> list | None:
    """A queue or history ``prompt`` item [number, prompt_id, graph, extra_data, ...] as its owner sees it
    (its graph, of extra_data only its client_id); None when it is not the caller's."""
    if not isinstance(item, list) or len(item) < 4 or not isinstance(item[1], str):
        return None
    extra = item[3] if isinstance(item[3], dict) else {}
    ours = policy.owned.client_of(caller, extra.get("client_id"))
    if ours and not policy.owned.owns(caller, item[1]):
        policy.owned.accepted(caller, item[1])  # e.g. a Benchmark node's runs, queued under our client_id
    if not policy.owned.owns(caller, item[1]):
        return None
    return [item[0], item[1], item[2], {"client_id": extra["client_id"]} if ours else {}, *item[4:]]


def _rewrite(rewrite: Callable[[object], object]) -> Callable[[bytes], bytes]:
    def apply(raw: bytes) -> bytes:
        try:
            data = json.loads(raw)
        except ValueError:
            return b"{}"
        return json.dumps(rewrite(data)).encode()

    return apply


async def _history(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    def rewrite(data: object) -> object:
        kept = {}
        for prompt_id, entry in (data.items() if isinstance(data, dict) else ()):
            if isinstance(entry, dict) and (item := _own_item(entry.get("prompt"), caller, policy)) is not None:
                kept[prompt_id] = {**entry, "prompt": item}
                policy.saw_outputs(caller, entry.get("outputs"))
        return kept

    return Forward(reply=_rewrite(rewrite))


async def _queue(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    def rewrite(data: object) -> object:
        if not isinstance(data, dict):
            return {}
        return {key: [own for item in items if (own := _own_item(item, caller, policy)) is not None]
                if isinstance(items, list) else items for key, items in data.items()}

    return Forward(reply=_rewrite(rewrite))


async def _queue_delete(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    read = await read_json(request, MAX_CONTROL_BYTES)
    if isinstance(read, web.Response):
        return read
    body, data = read
    if not isinstance(data, dict) or set(data) != {"delete"} or not isinstance(data["delete"], list) \
            or not all(policy.owned.owns(caller, prompt_id) for prompt_id in data["delete"]):
        return refuse("only deleting prompts of your own")
    return Forward(body)


async def _interrupt(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    read = await read_json(request, MAX_CONTROL_BYTES)
    if isinstance(read, web.Response):
        return read
    body, data = read
    if not isinstance(data, dict) or set(data) != {"prompt_id"} \
            or not policy.owned.owns(caller, data["prompt_id"]):
        return refuse("only interrupting a prompt of your own")
    return Forward(body)


async def _files_delete(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    """/forget and retention: the caller's files and prompts go on, the others count as ``refused``."""
    read = await read_json(request, MAX_DELETE_BYTES)
    if isinstance(read, web.Response):
        return read
    _, data = read
    if not isinstance(data, dict) or not set(data) <= {"files", "prompt_ids"} \
            or not all(isinstance(data.get(key, []), list) for key in ("files", "prompt_ids")):
        return refuse("a list of files and one of prompt ids", 400)
    files = [f for f in data.get("files", []) if (ref := _ref(f)) is not None and policy.owned.has_file(caller, ref)]
    others = len(data.get("files", [])) - len(files)
    prompt_ids = [p for p in data.get("prompt_ids", []) if policy.owned.owns(caller, p)]

    def counted(reply: object) -> object:
        if isinstance(reply, dict) and isinstance(reply.get("refused"), int):
            reply["refused"] += others
        return reply

    return Forward(json.dumps({"files": files, "prompt_ids": prompt_ids}).encode(), reply=_rewrite(counted))


def _ref(file: object) -> FileRef | None:
    ref = tuple(file.get(key) for key in ("type", "subfolder", "filename")) if isinstance(file, dict) else ()
    return ref if len(ref) == 3 and all(isinstance(part, str) for part in ref) else None


async def _pass(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    return Forward()


# (method, path, rule); "{}" stands for one path segment. Every path jobs/comfy/http.py calls.
ROUTES: tuple[tuple[str, str, Rule], ...] = (
    ("POST", "/prompt", _prompt),
    ("GET", "/ws", _websocket_rule),
    ("GET", "/view", _view),
    ("POST", "/upload/image", _upload),
    ("GET", "/history/{}", _history),
    ("GET", "/queue", _queue),
    ("POST", "/queue", _queue_delete),
    ("POST", "/interrupt", _interrupt),
    ("GET", "/object_info", _pass),
    ("GET", "/object_info/{}", _pass),
    ("GET", "/system_stats", _pass),
    ("GET", "/courier/health", _pass),
    ("POST", "/courier/files/delete", _files_delete),  # /forget and retention
)


def route(method: str, raw_path: str) -> Rule | None:
    """The rule of ``method raw_path`` (still percent-encoded, no query) in ROUTES; None: not there."""
    if not raw_path.startswith("/"):
        return None
    segments = [unquote(s, errors="replace") for s in raw_path[1:].split("/")]
    if any(s in ("", ".", "..") or "/" in s or "\\" in s for s in segments):
        return None
    if segments[0] == "api" and len(segments) > 1:
        segments = segments[1:]
    for route_method, pattern, rule in ROUTES:
        parts = pattern[1:].split("/")
        if route_method == method and len(parts) == len(segments) and all(
                p == "{}" or p == s for p, s in zip(parts, segments, strict=True)):
            return rule
