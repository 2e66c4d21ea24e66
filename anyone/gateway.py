"""The hidden service's front door: a small reverse proxy that passes only what a Courier bot needs.

anon's ``HiddenServicePort`` points here (127.0.0.1, a free port), not at ComfyUI.
Onion clients cannot be told apart, so every request must carry a bot-host
credential (``X-Courier-Credential``, provisioned with the client key: see
hidden_service.py); the proxy keeps only the credentials' SHA-256 and compares in
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

Bodies a rule checks are read to their end (Content-Length or chunked: anon hands
them over in small cells), 413 past the rule's limit.

Everything else gets 403 and never reaches ComfyUI -- the editor, ``/userdata``,
other packs' routes such as ComfyUI-Manager's node installation.
``expose_ui=True`` (``COURIER_ANYONE_EXPOSE_UI``) passes everything, unchecked.

The path is judged as ComfyUI will see it: split on ``/``, each segment
percent-decoded; an empty, ``.`` or ``..`` segment, or one that decodes to a
slash or backslash, is refused, and the raw path is forwarded unchanged. The
target is fixed (the local ComfyUI) and so is the ``Host`` it is sent (the
target's ``127.0.0.1:PORT``, so ComfyUI's own Host checks see a loopback request;
with ``expose_ui`` the client's ``.anon`` Host, which the editor's Origin matches).
Bodies that need no check stream both ways, hop-by-hop headers are dropped, and
websocket frames (text and binary: ComfyUI's previews) pass both ways.
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
from aiohttp import MultipartReader, StreamReader, WSMsgType, web
from aiohttp.base_protocol import BaseProtocol
from multidict import CIMultiDict, MultiDictProxy
from yarl import URL

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
# RFC 9110 7.6.1, plus what a proxy must never forward
HOP_BY_HOP = frozenset(("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "transfer-encoding", "upgrade"))
DENIED = "not available through the hidden service\n"

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


def _refuse(reason: str, status: int = 403) -> web.Response:
    return web.Response(status=status, text=f"{DENIED.strip()}: {reason}\n")


async def _read(request: web.Request, limit: int) -> bytes | web.Response:
    """The whole body (``content.read(n)`` gives only what has arrived: read to its end), or a 413 past
    ``limit`` bytes."""
    if request.content_length is not None and request.content_length > limit:
        return _refuse(f"body over {limit} bytes", 413)
    body = bytearray()
    while chunk := await request.content.read(limit + 1 - len(body)):
        body += chunk
        if len(body) > limit:
            return _refuse(f"body over {limit} bytes", 413)
    return bytes(body)


async def _json(request: web.Request, limit: int) -> tuple[bytes, object] | web.Response:
    body = await _read(request, limit)
    if isinstance(body, web.Response):
        return body
    try:
        return body, json.loads(body)
    except ValueError:
        return _refuse("the body is not JSON", 400)


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
    read = await _json(request, MAX_PROMPT_BYTES)
    if isinstance(read, web.Response):
        return read
    body, data = read
    if not isinstance(data, dict) or not set(data) <= PROMPT_KEYS:
        return _refuse(f"a prompt takes only {', '.join(sorted(PROMPT_KEYS))}")
    graph, client_id, prompt_id = data.get("prompt"), data.get("client_id"), data.get("prompt_id")
    if not isinstance(client_id, str) or not client_id or not isinstance(prompt_id, str) \
            or not PROMPT_ID.fullmatch(prompt_id):
        return _refuse("a prompt needs its client_id and a prompt_id of letters, digits, - and _")
    if not isinstance(graph, dict) or not all(
            isinstance(node, dict) and isinstance(node.get("class_type"), str) for node in graph.values()):
        return _refuse("not an API-format graph", 400)
    if any(node.get("inputs", {}).get(EDITOR_ONLY_INPUT) not in (None, "") for node in graph.values()
           if isinstance(node.get("inputs"), dict)):
        return _refuse(f"{EDITOR_ONLY_INPUT} is for the graph editor only")
    if not await policy.sendable({node["class_type"] for node in graph.values()}):
        return _refuse("a node type no Courier command uses")
    if policy.graph_check is not None and (reason := policy.graph_check(graph)) is not None:
        return _refuse(reason)
    if not policy.owned.claim_client(client_id, caller):
        return _refuse("that client_id belongs to another client")
    if prompt_id in policy.queuing:
        return _refuse("that prompt_id is taken: send a new one", 409)
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
            _refuse("that prompt_id is taken: send a new one", 409)

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
        return _refuse("a websocket needs a clientId of its own")
    return Forward()


async def _view(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    query = request.rel_url.query
    folder, subfolder, name = query.get("type", "output"), query.get("subfolder", ""), query.get("filename")
    if not _single(query, "type", "subfolder", "filename") or folder not in FOLDER_TYPES or not plain_name(name):
        return _refuse("view takes one plain filename, subfolder and type")
    if policy.owned.has_file(caller, (folder, subfolder, name)):
        return Forward()
    return _refuse("only files you uploaded or your prompts wrote")


def _stream(data: bytes) -> StreamReader:
    """``data`` as a read stream (its limit above the data's size: a full buffer would pause a protocol
    that has no transport)."""
    stream = StreamReader(BaseProtocol(asyncio.get_running_loop()), max(2**16, len(data)),
                          loop=asyncio.get_running_loop())
    stream.feed_data(data)
    stream.feed_eof()
    return stream


async def _upload(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    body = await _read(request, MAX_UPLOAD_BYTES)
    if isinstance(body, web.Response):
        return body
    fields: dict[str, list[str]] = {}
    image = b""
    try:
        reader = MultipartReader(request.headers, _stream(body))
        while (part := await reader.next()) is not None:
            name = part.name or ""
            if name == "image":
                image, value = await part.read(), part.filename
                content_type = part.headers.get("Content-Type", "application/octet-stream")
            else:
                value = await part.text()
            await part.release()
            fields.setdefault(name, []).append(value)
    except (AssertionError, ValueError, TypeError, LookupError, aiohttp.ClientError):
        return _refuse("not a form upload", 400)
    if any(len(values) > 1 for values in fields.values()) or len(fields.get("image", [])) != 1:
        return _refuse("one image, one of each field")
    single = {name: values[0] for name, values in fields.items()}
    folder, subfolder, filename = single.get("type", "input"), single.get("subfolder"), single["image"]
    if folder not in FOLDER_TYPES or not courier_subfolder(subfolder) or not plain_name(filename):
        return _refuse("uploads go under courier/ only")
    if not policy.owned.has_file(caller, (folder, subfolder, filename)):
        single["overwrite"] = "false"  # another's file (or the local bot's, the editor's) is never replaced
    form = aiohttp.FormData()
    form.add_field("image", image, filename=filename, content_type=content_type)
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
    read = await _json(request, MAX_CONTROL_BYTES)
    if isinstance(read, web.Response):
        return read
    body, data = read
    if not isinstance(data, dict) or set(data) != {"delete"} or not isinstance(data["delete"], list) \
            or not all(policy.owned.owns(caller, prompt_id) for prompt_id in data["delete"]):
        return _refuse("only deleting prompts of your own")
    return Forward(body)


async def _interrupt(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    read = await _json(request, MAX_CONTROL_BYTES)
    if isinstance(read, web.Response):
        return read
    body, data = read
    if not isinstance(data, dict) or set(data) != {"prompt_id"} \
            or not policy.owned.owns(caller, data["prompt_id"]):
        return _refuse("only interrupting a prompt of your own")
    return Forward(body)


async def _files_delete(request: web.Request, caller: str, policy: Policy) -> Forward | web.Response:
    """/forget and retention: the caller's files and prompts go on, the others count as ``refused``."""
    read = await _json(request, MAX_DELETE_BYTES)
    if isinstance(read, web.Response):
        return read
    _, data = read
    if not isinstance(data, dict) or not set(data) <= {"files", "prompt_ids"} \
            or not all(isinstance(data.get(key, []), list) for key in ("files", "prompt_ids")):
        return _refuse("a list of files and one of prompt ids", 400)
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


# (method, path, rule); "{}" stands for one path segment. Every path jobs/comfy_client.py calls.
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

TARGET = web.AppKey("courier_gateway_target", URL)
EXPOSE_UI = web.AppKey("courier_gateway_expose_ui", bool)
POLICY = web.AppKey("courier_gateway_policy", Policy)
SESSION = web.AppKey("courier_gateway_session", aiohttp.ClientSession)


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
    return None


def _end_to_end(headers, *, websocket: bool = False) -> CIMultiDict:
    """``headers`` without hop-by-hop ones (and those ``Connection`` names); websocket: no handshake headers."""
    named = {h.strip().lower() for h in headers.get("Connection", "").split(",")}
    return CIMultiDict((key, value) for key, value in headers.items()
                       if key.lower() not in HOP_BY_HOP and key.lower() not in named
                       and not (websocket and key.lower().startswith("sec-websocket-")))


async def _upstream_session(app: web.Application):
    app[SESSION] = aiohttp.ClientSession(
        auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(), skip_auto_headers=("User-Agent",),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
    yield
    await app[SESSION].close()


async def _forward(request: web.Request) -> web.StreamResponse:
    raw_path = request.rel_url.raw_path
    forward = Forward()
    caller = None
    if not request.app[EXPOSE_UI]:
        rule = route(request.method, raw_path)
        policy = request.app[POLICY]
        caller = policy.caller(request)
        if rule is None or caller is None:
            return web.Response(status=403, text=DENIED)
        decided = await rule(request, caller, policy)
        if isinstance(decided, web.Response):
            return decided
        forward = decided
    try:
        return await _proxy(request, forward, caller)
    finally:
        if forward.release is not None:
            forward.release()


async def _proxy(request: web.Request, forward: Forward, caller: str | None) -> web.StreamResponse:
    """Send the request on to ComfyUI (``forward.body`` in place of the client's, when a rule read it)."""
    raw_path = request.rel_url.raw_path
    target = request.app[TARGET]
    url = URL.build(scheme=target.scheme, host=target.raw_host, port=target.port, path=raw_path,
                    query_string=request.rel_url.raw_query_string, encoded=True)
    headers = _end_to_end(request.headers, websocket=request.headers.get("Upgrade", "").lower() == "websocket")
    headers.popall(CREDENTIAL_HEADER, None)
    if not request.app[EXPOSE_UI]:  # the editor, passed whole, keeps its .anon Host (ComfyUI compares it with Origin)
        headers["Host"] = f"{target.raw_host}:{target.port}"
    if forward.reply is not None:
        headers.popall("Accept-Encoding", None)  # a reply we rewrite comes as plain JSON
    if forward.body is not None:  # its length (and a form's boundary) are those of what we send
        headers.popall("Content-Length", None)
        if isinstance(forward.body, aiohttp.FormData):
            headers.popall("Content-Type", None)
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return await _websocket(request, url, headers, caller)
    data = forward.body
    if data is None and request.body_exists:
        data = request.content
    try:
        upstream = await request.app[SESSION].request(request.method, url, headers=headers, allow_redirects=False,
                                                      data=data)
    except (aiohttp.ClientError, OSError):
        return web.Response(status=502, text="ComfyUI is not reachable\n")
    async with upstream:
        reply = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP_BY_HOP and not (forward.reply is not None and key.lower() == "content-length"):
                reply.headers.add(key, value)
        try:
            if forward.reply is not None:
                body = forward.reply(await upstream.read()) if upstream.status == 200 else await upstream.read()
                reply.content_length = len(body)
                await reply.prepare(request)
                await reply.write(body)
            else:
                await reply.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await reply.write(chunk)
            await reply.write_eof()
        except (ConnectionResetError, aiohttp.ClientError):
            pass  # either side went away mid-transfer
    return reply


async def _websocket(request: web.Request, url: URL, headers: CIMultiDict, caller: str | None) -> web.StreamResponse:
    protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    try:
        upstream = await request.app[SESSION].ws_connect(
            url, headers=headers, protocols=protocols,
            max_msg_size=0)  # ComfyUI may send whole images as binary frames
    except (aiohttp.ClientError, OSError):
        return web.Response(status=502, text="ComfyUI is not reachable\n")
    downstream = web.WebSocketResponse(protocols=[upstream.protocol] if upstream.protocol else ())
    seen = None if caller is None else functools.partial(_executed, request.app[POLICY], caller)
    try:
        await downstream.prepare(request)
        pumps = [asyncio.create_task(_pump(upstream, downstream, seen)),
                 asyncio.create_task(_pump(downstream, upstream))]
        _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
    finally:
        await upstream.close()
        await downstream.close()
    return downstream


def _executed(policy: Policy, caller: str, text: str) -> None:
    """A text frame ComfyUI sent this caller's socket: an ``executed`` one names files its prompt wrote."""
    if not text.startswith('{"type": "executed"'):
        return
    try:
        frame = json.loads(text)
    except ValueError:
        return
    output = frame.get("data", {}).get("output") if isinstance(frame.get("data"), dict) else None
    policy.saw_outputs(caller, {"node": output})


async def _pump(source, sink, seen: Callable[[str], None] | None = None) -> None:
    """Copy text and binary frames from ``source`` to ``sink`` until either side closes."""
    async for message in source:
        if message.type == WSMsgType.TEXT:
            if seen is not None:
                seen(message.data)
            await sink.send_str(message.data)
        elif message.type == WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        else:
            break


def gateway_app(target: str, *, expose_ui: bool = False, policy: Policy | None = None) -> web.Application:
    """The proxy as an aiohttp app in front of ``target`` (``http://127.0.0.1:8188``)."""
    app = web.Application(client_max_size=MAX_UPLOAD_BYTES)
    app[TARGET] = URL(target)
    app[EXPOSE_UI] = expose_ui
    app[POLICY] = policy if policy is not None else Policy()
    app.cleanup_ctx.append(_upstream_session)
    app.router.add_route("*", "/{path:.*}", _forward)
    return app


class Gateway:
    """``gateway_app`` served on 127.0.0.1 (a free port); ``address`` is ``127.0.0.1:PORT`` once started.

    ``policy.credentials`` and ``policy.node_types`` may be set (and changed) at any time.
    """

    def __init__(self, target: str, *, expose_ui: bool = False):
        self.target = target
        self.expose_ui = expose_ui
        self.policy = Policy()
        self.address: str | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        if self._runner is None:
            self._runner = web.AppRunner(gateway_app(self.target, expose_ui=self.expose_ui, policy=self.policy),
                                         access_log=None)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", 0).start()
            self.address = f"127.0.0.1:{self._runner.addresses[0][1]}"
        return self.address

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
