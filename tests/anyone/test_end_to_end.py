"""The whole privacy pipeline on the private Anyone network (127.0.0.1 only): the real bot
(python-telegram-bot), its own anon, real PostgreSQL, the Bot API emulator and a ComfyUI
backend (the fake on loopback, or a real ComfyUI with the pack when COMFYUI_DIR is set).

Each Courier joins the private network through ``<data dir>/anyone/test-network.torrc``
(``PrivateNetwork.write_test_network``), the same way a ComfyUI started as its own process does.

How we know the Bot API traffic went through anon: the bot is pointed at a recording gate in
front of the emulator, not at the emulator; for every connection the gate accepts it looks up
(in /proc, while the connection is open) which process owns the other end. Through Anyone that
is one of the private network's exit relays; a direct connection would be this test process.
"""

import asyncio
import io
import os
import random
import signal

import numpy as np
import pytest
from PIL import Image

from comfyui_courier.anyone.errors import PrivateNetworkError
from comfyui_courier.anyone.privnet import TEST_NETWORK_FILE, load_test_network
from comfyui_courier.anyone.service import AnyoneService
from comfyui_courier.core import i18n
from comfyui_courier.core.config import Settings, load_settings
from comfyui_courier.jobs import backends as backend_health
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.fixtures.anyone import share_client_key, socket_owner
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import until

USER = 111
BOOT_S = 120  # anon bootstrap on the private network (~5 s) + PostgreSQL + the first Bot API call
RESULT_S = 120  # a fresh .anon backend: descriptor fetch, rendezvous, maybe one dispatcher retry (5 s)
ADDRESS_S = 120  # ComfyUI's anon: launch, bootstrap, keys
ADMIN_TOKEN = "e2e-admin-token"  # a hidden service shows its address only to the token


class OwnerGate:
    """A TCP forwarder on 127.0.0.1 that records who opened each connection (see the module docstring)."""

    def __init__(self, target_port: int, candidates):
        self.target_port = target_port
        self.candidates = candidates  # () -> {pid: name}, read at each accept
        self.owners: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> "OwnerGate":
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        peer_port = writer.get_extra_info("peername")[1]
        self.owners.append(await asyncio.to_thread(socket_owner, peer_port, self.port, self.candidates()))
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers.add(up_writer)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            sink.close()


@pytest.fixture
async def start_courier(anyone_privnet, anon_binary, botapi, botapi_bot, pg_database, tmp_path):
    """``await start_courier(COURIER_X=..., key_from=None)``: a booted Courier (no local backend) with its own
    anon on the private network, the bot on ``botapi_bot`` (``COURIER_TELEGRAM_API_URL`` may point elsewhere);
    ``key_from``: the data directory of a hidden service whose provisioned client key this bot gets."""
    started = []

    async def start(key_from=None, **env) -> Courier:
        settings = load_settings(None, {
            "TELEGRAM_BOT_TOKEN": botapi_bot.token,
            "COURIER_TELEGRAM_API_URL": botapi.url,
            "COURIER_DATABASE_URL": pg_database,
            "COURIER_ALLOWED_USERS": str(USER),
            "COURIER_PROGRESS_INTERVAL_S": "0",
            "COURIER_ANYONE": "1",
            "COURIER_ANYONE_AGREE_TO_TERMS": "1",
            "COURIER_ANON_BINARY": str(anon_binary),
            **env,
        })
        data_dir = tmp_path / f"courier{len(started)}"
        anyone_privnet.write_test_network(data_dir)
        if key_from is not None:
            share_client_key(key_from, data_dir)
        courier = Courier(settings, data_dir, None)
        started.append(courier)
        await courier.start()
        try:  # the boot waits for anon only when the bot's traffic must go through it
            await asyncio.wait_for(courier.booted(), BOOT_S)
            await courier.anyone.wait_ready(BOOT_S)
        except (asyncio.TimeoutError, TimeoutError):
            raise AssertionError(f"not up after {BOOT_S} s: {describe(courier)}") from None
        for name in ("anyone", "bot", "dispatcher"):
            assert courier.health.state(name) == "ok", describe(courier)
        assert courier.health_report()["components"]["anyone"]["network"].startswith("private test network")
        return courier

    yield start
    for courier in reversed(started):
        await courier.stop()


def describe(courier) -> str:
    """Health and the last lines anon wrote, for assertion messages."""
    process = courier.anyone.process if courier.anyone else None
    return f"{courier.health_report()}\nanon said:\n" + "\n".join(process.output if process else ())


def replies_to(message_id):
    return lambda call: call.params.get("reply_to_message_id") in (message_id, str(message_id)) or (
        call.result.get("reply_to_message", {}).get("message_id") == message_id)


async def demo_result(bot, courier) -> dict:
    """Send ``/demo hello`` and return the result document the bot sends back."""
    request = bot.inject_text(USER, "/demo hello")
    try:
        call = await bot.wait_for_call("sendDocument", where=replies_to(request["message_id"]), timeout=RESULT_S)
        # the job is recorded as succeeded before the status message says "Done"
        await bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].startswith("Done"),
                                timeout=RESULT_S)
    except TimeoutError:
        raise AssertionError(f"no result; the bot sent {[(c.method, c.params.get('text')) for c in bot.outbox]}; "
                             f"{describe(courier)}") from None
    document = call.result["document"]
    assert document["file_name"].endswith(".png")
    assert bot.file_bytes(document["file_id"]).startswith(b"\x89PNG")
    async with courier.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT status FROM courier_jobs WHERE command = 'demo'") == "succeeded"
    return document


@pytest.fixture
async def gate(anyone_privnet, botapi):
    """An OwnerGate in front of the emulator; ``gate.holders`` names the processes it can tell apart."""
    holders = {os.getpid(): "this test process (a direct connection)"}
    holders.update({n.process.pid: f"privnet {n.role} {n.name}" for n in anyone_privnet.nodes if n.process})
    gate = await OwnerGate(botapi.port, lambda: holders).start()
    gate.holders = holders
    yield gate
    await gate.stop()


async def test_bot_api_traffic_goes_through_an_exit(gate, start_courier, botapi_bot):
    """COURIER_PROXY_TELEGRAM: every Bot API connection of the bot arrives from an exit relay."""
    async with FakeComfyUI() as backend:
        courier = await start_courier(COURIER_TELEGRAM_API_URL=gate.url, COURIER_PROXY_TELEGRAM="1",
                                      COURIER_BACKENDS=backend.url)
        gate.holders[courier.anyone.process.pid] = "the bot's own anon (not an exit)"
        await demo_result(botapi_bot, courier)
        assert backend.prompts, "the job never reached the backend"
    exits = {name for name in gate.holders.values() if name.startswith("privnet exit")}
    assert gate.owners, "the bot never connected to the Bot API"
    assert set(gate.owners) <= exits, gate.owners
    calls = {c.method for c in botapi_bot.calls}
    assert {"getMe", "getUpdates", "sendMessage", "sendDocument"} <= calls, calls


async def test_demo_job_runs_on_an_anon_backend(anyone_service_factory, start_courier, botapi_bot):
    """Backend ``http://<id>.anon``: a hidden service in front of the fake ComfyUI on loopback; the bot
    holds the client key the service provisioned."""
    async with FakeComfyUI() as backend:
        published = await anyone_service_factory(backend.url)
        url = f"http://{published.onion_address}"
        courier = await start_courier(COURIER_BACKENDS=url, COURIER_PRIVATE_MODE="1", key_from=published.dir.parent)
        assert [client.base_url for client in courier.dispatcher.clients] == [url]
        await demo_result(botapi_bot, courier)
        assert backend.prompts, "the job never reached the backend"


@pytest.mark.timeout(400)
async def test_the_bots_anon_killed_mid_job_finishes_the_job_once_anon_is_back(
        anyone_service_factory, start_courier, botapi_bot, monkeypatch, caplog):
    """SIGKILL to the bot's own anon while its job waits on a ``.anon`` backend: the circuit and the
    job's websocket die with it, the supervisor starts anon again (the same SOCKS port), and the job
    goes on through it (the websocket reopened, or run again if the backend was given up meanwhile,
    the user told), its result sent once."""
    monkeypatch.setattr(backend_health, "INTERVAL_S", 0.5)
    async with FakeComfyUI() as backend:
        published = await anyone_service_factory(backend.url)
        courier = await start_courier(COURIER_BACKENDS=f"http://{published.onion_address}", COURIER_PRIVATE_MODE="1",
                                      key_from=published.dir.parent)
        backend.pause()  # the prompt waits in the backend's queue: the job is mid-way
        request = botapi_bot.inject_text(USER, "/demo through a dying circuit")
        await until(lambda: asyncio.sleep(0, backend.prompts), RESULT_S, "the prompt at the backend")
        anon = courier.anyone.process
        os.kill(anon.pid, signal.SIGKILL)
        backend.resume()  # the first prompt runs to its end, unheard: its websocket went with anon
        try:
            await botapi_bot.wait_for_call("sendDocument", where=replies_to(request["message_id"]),
                                           timeout=2 * RESULT_S)
        except TimeoutError:
            said = [(c.method, c.params.get("text")) for c in botapi_bot.outbox]
            raise AssertionError(f"no result; the bot said {said}; {describe(courier)}") from None
        async with courier.store.pool.acquire() as conn:
            job = await until(lambda: conn.fetchrow("SELECT status, attempts FROM courier_jobs "
                                                    "WHERE status <> 'running'"),
                              30, "the job recorded")
        assert anon.restarts >= 1
    # the fault hit the job: its websocket dropped, or its POST /prompt (then it ran again)
    assert "dropped while 1 prompt(s) ran" in caplog.text or "(attempt 1 of 3) lost" in caplog.text
    assert job["status"] == "succeeded"
    assert len([c for c in botapi_bot.outbox if c.method == "sendDocument"]) == 1
    said = [c.params.get("text") for c in botapi_bot.outbox if c.method in ("sendMessage", "editMessageText")]
    assert job["attempts"] == 1 or i18n.text("en", "backend_retrying") in said, said
    assert not any("failed" in (text or "") for text in said), said


async def comfyui_hidden_service(anyone_privnet, anon_binary, comfyui_factory) -> tuple[str, object]:
    """A real ComfyUI with the pack, published as a hidden service on the private network: (its
    ``http://<id>.anon`` URL, the ComfyUI process), once ``/courier/anyone`` says it is up."""
    comfy = comfyui_factory(start=False, env={
        "COURIER_ANYONE": "1", "COURIER_ANYONE_AGREE_TO_TERMS": "1", "COURIER_ANON_BINARY": str(anon_binary),
        "COURIER_ADMIN_TOKEN": ADMIN_TOKEN})
    comfy.prepare()
    anyone_privnet.write_test_network(comfy.user_directory / "courier")
    await asyncio.to_thread(comfy.start)

    loop = asyncio.get_running_loop()
    deadline = loop.time() + ADDRESS_S
    while True:  # the pack starts anon in the background; /courier/anyone says when it is up
        status = await asyncio.to_thread(comfy.get_json, "/courier/anyone", token=ADMIN_TOKEN)
        if status["state"] == "ok" and status["onion_address"]:
            break
        assert loop.time() < deadline, f"no hidden service after {ADDRESS_S} s: {status}\n{comfy.log_tail()}"
        await asyncio.sleep(0.25)
    assert status["network"].startswith("private test network"), status
    assert status["url"] == f"http://{status['onion_address']}/"
    assert "warning" not in status  # --listen 127.0.0.1, client authorization on, only the bot's routes
    assert status["client_auth"] is True and status["expose_ui"] is False
    return f"http://{status['onion_address']}", comfy


async def test_comfyui_with_the_pack_is_a_hidden_service_the_bot_runs_demo_on(
        anyone_privnet, anon_binary, comfyui_factory, start_courier, botapi_bot):
    """A real ComfyUI publishes itself on the private network; the bot's /demo job reaches it as .anon only."""
    url, comfy = await comfyui_hidden_service(anyone_privnet, anon_binary, comfyui_factory)
    # through the gateway: /prompt, /ws, /history, /view of a real ComfyUI
    courier = await start_courier(COURIER_BACKENDS=url, COURIER_PRIVATE_MODE="1",
                                  key_from=comfy.user_directory / "courier")
    await demo_result(botapi_bot, courier)


def noise_photo(size: int) -> bytes:
    """A PNG of about ``size`` bytes (random noise does not compress): a real photo's size."""
    side = int((size / 3) ** 0.5)
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), random.Random(side).randbytes(side * side * 3)).save(out, "PNG")
    return out.getvalue()


async def test_a_real_size_photo_is_edited_on_an_anon_backend(
        anyone_privnet, anon_binary, comfyui_factory, start_courier, botapi_bot):
    """A ~1 MB photo (sent as a file: Telegram keeps its bytes) reaches the real ComfyUI through anon's small
    cells and the gateway (its body read whole: issue 27, item 4) and comes back inverted."""
    url, comfy = await comfyui_hidden_service(anyone_privnet, anon_binary, comfyui_factory)
    courier = await start_courier(COURIER_BACKENDS=url, COURIER_PRIVATE_MODE="1",
                                  key_from=comfy.user_directory / "courier")
    photo = noise_photo(2**20)
    assert len(photo) > 2**20 * 0.9
    request = botapi_bot.inject_document(USER, photo, "photo.png", mime_type="image/png", caption="/demoedit")
    try:
        call = await botapi_bot.wait_for_call("sendDocument", where=replies_to(request["message_id"]),
                                              timeout=RESULT_S)
    except TimeoutError:
        said = [(c.method, c.params.get("text")) for c in botapi_bot.outbox]
        raise AssertionError(f"no result; the bot said {said}; {describe(courier)}\n{comfy.log_tail()}") from None
    result = np.asarray(Image.open(io.BytesIO(botapi_bot.file_bytes(call.result["document"]["file_id"]))))
    original = np.asarray(Image.open(io.BytesIO(photo)))
    assert result.shape == original.shape and abs(result.mean() - (255 - original.mean())) < 3
    uploaded = list((comfy.base_directory / "input" / "courier").glob("job-*.png"))
    assert [path.stat().st_size for path in uploaded] == [len(photo)]  # the whole photo, as sent


def test_test_network_file_accepts_only_a_test_network(tmp_path):
    path = tmp_path / TEST_NETWORK_FILE
    assert load_test_network(path) == []  # no file: the public network
    path.write_text("# comment\nTestingTorNetwork 1\nDirAuthority a orport=1 no-v2 v3ident=AB 127.0.0.1:2 CD\n")
    assert load_test_network(path) == [("TestingTorNetwork", "1"),
                                       ("DirAuthority", "a orport=1 no-v2 v3ident=AB 127.0.0.1:2 CD")]
    path.write_text("DirAuthority a orport=1 no-v2 v3ident=AB 127.0.0.1:2 CD\n")
    with pytest.raises(PrivateNetworkError, match="TestingTorNetwork 1"):
        load_test_network(path)
    path.write_text("TestingTorNetwork 1\nSocksPort 0.0.0.0:9050\n")
    with pytest.raises(PrivateNetworkError, match="line 2: 'SocksPort'"):
        load_test_network(path)


async def test_a_bad_test_network_file_is_a_health_error_and_starts_nothing(anon_binary, tmp_path):
    (tmp_path / "anyone").mkdir()
    (tmp_path / "anyone" / TEST_NETWORK_FILE).write_text("TestingTorNetwork 1\nExitRelay 1\n")
    service = AnyoneService(Settings(anyone_enabled=True, anyone_agree_to_terms=True, anon_binary=str(anon_binary)),
                            tmp_path)
    await service.start()
    assert service.process is None
    assert service.health()["state"] == "error" and "ExitRelay" in service.health()["reason"]
