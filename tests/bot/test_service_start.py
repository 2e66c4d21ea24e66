"""Start-up that tells and retries (issue 21, item 1): a Bot API that is down at start is tried again
with backoff and the bot serves once it is up, without a restart; a rejected token is said once, in
one console line without the token, and not tried again. Real python-telegram-bot against the Bot API
emulator (stopped and started again on its port), real PostgreSQL. Also when the bot's traffic
must go through Anyone and anon has not bootstrapped yet: it waits (never connects directly) and
serves through the SOCKS port once anon is ready."""

import asyncio
import logging
import socket
from pathlib import Path

import pytest

from comfyui_courier import runtime
from comfyui_courier.anyone.errors import AnyoneError
from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(90)

USER = 2101


def make_courier(botapi, botapi_bot, pg_database: str, fake_comfy, data_dir: Path) -> Courier:
    return Courier(load_settings(None, {
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database, "COURIER_ALLOWED_USERS": str(USER)}), data_dir, fake_comfy.url)


def console(caplog, needle: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if needle in record.getMessage()]


async def test_a_bot_api_down_at_start_is_tried_again_and_the_bot_serves_once_it_is_up(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(runtime, "BOT_RETRY_FIRST_S", 0.2, raising=False)
    caplog.set_level(logging.INFO, logger="courier")
    courier = make_courier(botapi, botapi_bot, pg_database, fake_comfy, tmp_path)
    await botapi.stop()  # nothing listens on its port now
    try:
        await courier.start()
        await courier.booted()
        health = courier.health_report()["components"]
        assert health["bot"]["state"] == "error" and "trying again in" in health["bot"]["reason"], health
        assert health["dispatcher"]["state"] == "off", health
        retried = courier.health.report()["bot"]["attempts"]
        async def tried_twice_more():
            return courier.health.report()["bot"].get("attempts", 0) >= retried + 2

        await until(tried_twice_more, 30, "two more tries")
        assert courier.health.state("bot") == "error"
        await botapi.start()  # the same port: Telegram is reachable again
        await botapi.wait_for(lambda: courier.health.state("dispatcher") == "ok", timeout=30)
        assert courier.health.state("bot") == "ok", courier.health_report()
        request = botapi_bot.inject_text(USER, "/demo after the outage")
        await botapi_bot.wait_for_call("sendDocument", timeout=30,
                                       where=lambda call: call.params.get("chat_id") == USER)
    finally:
        await courier.stop()
    told = console(caplog, "cannot reach the Bot API")
    assert len(told) == 1, told  # one line, however many tries
    assert "check the network" in told[0] and "trying again" in told[0]
    assert console(caplog, "connected to the Bot API as @")
    assert botapi_bot.token not in caplog.text and botapi_bot.token.partition(":")[2] not in caplog.text
    assert request["text"] == "/demo after the outage"


async def test_a_rejected_token_is_told_once_and_not_tried_again(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(runtime, "BOT_RETRY_FIRST_S", 0.05, raising=False)
    caplog.set_level(logging.INFO, logger="courier")
    botapi_bot.fail("getMe", times=10**6, status=401, description="Unauthorized")
    courier = make_courier(botapi, botapi_bot, pg_database, fake_comfy, tmp_path)
    try:
        await courier.start()
        await courier.booted()
        health = courier.health.report()["bot"]
        assert health["state"] == "error" and "rejected the bot token" in health["reason"], health
        assert getattr(courier, "_bot_retry", None) is None  # no task tries it again
        with pytest.raises(TimeoutError):  # and nothing else does: a retry would come within 0.05 s
            await botapi.wait_for(lambda: sum(call.method == "getMe" for call in botapi_bot.calls) > 1, timeout=1.5)
    finally:
        await courier.stop()
    told = console(caplog, "rejected the bot token")
    assert len(told) == 1 and "TELEGRAM_BOT_TOKEN" in told[0] and "not tried again" in told[0], told
    assert botapi_bot.token.partition(":")[2] not in caplog.text


class Socks5:
    """A SOCKS5 proxy on loopback (CONNECT, username/password as python-telegram-bot sends them):
    stands in for the SOCKS port of an anon that has bootstrapped."""

    def __init__(self):
        self.connections = 0
        self.server = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"socks5h://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader, writer):
        try:
            _, count = await reader.readexactly(2)
            await reader.readexactly(count)
            writer.write(b"\x05\x02")  # username/password
            _, length = await reader.readexactly(2)
            await reader.readexactly(length)
            (length,) = await reader.readexactly(1)
            await reader.readexactly(length)
            writer.write(b"\x01\x00")
            _, _, _, kind = await reader.readexactly(4)
            if kind == 3:
                host = (await reader.readexactly((await reader.readexactly(1))[0])).decode()
            else:
                host = socket.inet_ntoa(await reader.readexactly(4))
            port = int.from_bytes(await reader.readexactly(2), "big")
            assert host in ("127.0.0.1", "localhost"), host
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
            self.connections += 1
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


class Bootstrapping:
    """Our own anon as the runtime sees it, not bootstrapped until ``ready`` is set."""

    def __init__(self, socks_url: str):
        self.socks_url = socks_url
        self.ready = False
        self.asked = 0

    async def wait_ready(self, timeout: float) -> None:
        self.asked += 1
        if not self.ready:
            raise AnyoneError("anon has not bootstrapped yet")

    async def stop(self) -> None:
        pass


async def test_a_bot_whose_traffic_goes_through_anyone_waits_for_it_and_serves_once_it_is_ready(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(runtime, "BOT_RETRY_FIRST_S", 0.2, raising=False)
    caplog.set_level(logging.INFO, logger="courier")
    proxy = Socks5()
    anon = Bootstrapping(await proxy.start())
    courier = Courier(load_settings(None, {
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database, "COURIER_ALLOWED_USERS": str(USER),
        "COURIER_PROXY_TELEGRAM": "1"}), tmp_path, fake_comfy.url)
    courier.anyone = anon  # as _start_anyone leaves it; its anon has not bootstrapped
    try:
        await courier.start()
        await courier.booted()
        assert courier.health.state("bot") == "error", courier.health_report()
        assert "must go through Anyone" in courier.health.report()["bot"]["reason"]

        async def asked_again():
            return anon.asked >= 3

        await until(asked_again, 30, "Anyone asked again")
        assert not botapi_bot.calls  # never a direct connection meanwhile
        anon.ready = True

        async def serving():
            return courier.health.state("dispatcher") == "ok"

        await until(serving, 30, "bot serving")
        botapi_bot.inject_text(USER, "/demo through anyone")
        await botapi_bot.wait_for_call("sendDocument", timeout=30,
                                       where=lambda call: call.params.get("chat_id") == USER)
    finally:
        await courier.stop()
        await proxy.stop()
    assert proxy.connections >= 1  # the bot's Bot API traffic went through the SOCKS port
    told = console(caplog, "must go through Anyone")
    assert len(told) == 1, told
