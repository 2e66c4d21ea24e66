"""Client side: which connector a backend URL gets, and what private mode refuses."""

import asyncio

import aiohttp
import pytest
from aiohttp import web
from aiohttp_socks import ProxyConnector

from comfyui_courier.anyone import (
    AnyoneError,
    AnyoneUnavailable,
    OnionConnectError,
    PrivateModeViolation,
    UnsupportedAddress,
    client_timeout,
    describe_proxy_error,
    host_kind,
    make_connector,
    telegram_proxy_url,
)
from comfyui_courier.anyone.transport import DirectConnector
from comfyui_courier.core.config import Settings
from comfyui_courier.tests.support.http import serve_app

ONION = "http://wfy2yxcngp7liper5a3h6fodo7s5mlobfz7a5e7jmrym6gr6gshhyeid.anon"
SOCKS = "socks5h://127.0.0.1:9999"


@pytest.mark.parametrize("host, kind", [
    ("wfy2yxcngp7liper5a3h6fodo7s5mlobfz7a5e7jmrym6gr6gshhyeid.anon", "anon"),
    ("WWW.WFY2YXCNGP7LIPER5A3H6FODO7S5MLOBFZ7A5E7JMRYM6GR6GSHHYEID.ANON", "anon"),
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"), ("[::1]", "loopback"),
    ("localhost", "loopback"), ("10.0.0.5", "remote"), ("comfy.example.com", "remote"),
    ("0.0.0.0", "remote"),
])
def test_host_kind(host, kind):
    assert host_kind(host) == kind


@pytest.mark.parametrize("host", ["x.anyone", "x.onion"])
def test_other_onion_suffixes_are_refused_not_leaked(host):
    with pytest.raises(UnsupportedAddress, match=r"\.anon"):
        host_kind(host)


async def test_anon_goes_through_socks_with_remote_dns():
    connector = make_connector(ONION, Settings(), SOCKS)
    try:
        assert isinstance(connector, ProxyConnector)
        assert connector._rdns is True
        assert (connector._proxy_host, connector._proxy_port) == ("127.0.0.1", 9999)
        other = make_connector(ONION, Settings(), SOCKS)
        assert connector._proxy_username != other._proxy_username  # own circuits per connector
        await other.close()
    finally:
        await connector.close()


async def test_anon_socks_from_settings_and_missing():
    connector = make_connector(ONION, Settings(anyone_socks_url="socks5://127.0.0.1:9050"))
    assert connector._proxy_port == 9050
    await connector.close()
    with pytest.raises(AnyoneUnavailable, match="COURIER_ANYONE"):
        make_connector(ONION, Settings())


async def test_private_mode_refuses_direct_remote_but_not_loopback():
    private = Settings(private_mode=True)
    with pytest.raises(PrivateModeViolation, match="10.1.2.3"):
        make_connector("http://10.1.2.3:8188", private)
    connector = make_connector("http://127.0.0.1:8188", private)
    assert isinstance(connector, DirectConnector)
    await connector.close()
    connector = make_connector("http://10.1.2.3:8188", Settings())  # not private: direct is fine
    assert isinstance(connector, DirectConnector)
    await connector.close()


async def test_private_mode_refuses_a_redirect_off_loopback():
    async def hop(request):
        raise web.HTTPFound("http://10.255.255.1:8188/system_stats")

    app = web.Application()
    app.router.add_get("/system_stats", hop)
    async with serve_app(app) as root:
        url = f"{root}/system_stats"
        async with aiohttp.ClientSession(connector=make_connector(url, Settings(private_mode=True))) as s:
            with pytest.raises(PrivateModeViolation):
                await s.get(url)
        async with aiohttp.ClientSession(connector=make_connector(url, Settings())) as s:
            with pytest.raises(AnyoneUnavailable):  # a direct connector never resolves .anon
                await s.get(f"{ONION}/system_stats")


async def test_onion_connector_never_leaves_for_clearnet():
    async with aiohttp.ClientSession(connector=make_connector(ONION, Settings(), SOCKS)) as session:
        with pytest.raises(AnyoneError, match="hidden services only"):
            await session.get("http://127.0.0.1:8188/system_stats")  # e.g. a redirect


def test_timeouts_allow_a_rendezvous():
    assert client_timeout(ONION).sock_connect > client_timeout("http://127.0.0.1:8188").sock_connect
    assert client_timeout(ONION).total is None


def test_describe_extended_socks_errors():
    from python_socks import ProxyError

    assert "client authorization" in describe_proxy_error(ProxyError("Invalid reply code: 0xF4"))
    assert "descriptor not found" in describe_proxy_error(ProxyError("x", error_code=0xF0))
    assert describe_proxy_error(ProxyError("Host unreachable", error_code=4)) == "Host unreachable"


def test_telegram_proxy_url():
    assert telegram_proxy_url(Settings()) is None
    with pytest.raises(AnyoneUnavailable):
        telegram_proxy_url(Settings(proxy_telegram=True))
    url = telegram_proxy_url(Settings(proxy_telegram=True), SOCKS)
    assert url.startswith("socks5h://") and url.endswith("@127.0.0.1:9999")


async def test_failed_onion_connect_is_readable_and_takes_fresh_circuits():
    """A canned SOCKS5 exchange: anon accepts our credentials, then answers 0xF4."""
    seen_users = []

    async def fake_anon(reader, writer):
        _, methods = await reader.readexactly(2)
        await reader.readexactly(methods)
        writer.write(b"\x05\x02")  # username/password, please
        _, ulen = await reader.readexactly(2)
        seen_users.append((await reader.readexactly(ulen)).decode())
        await reader.readexactly((await reader.readexactly(1))[0])
        writer.write(b"\x01\x00")
        await reader.readexactly(4)  # version, CONNECT, reserved, address type (domain name)
        await reader.readexactly((await reader.readexactly(1))[0] + 2)  # domain name + port
        writer.write(b"\x05\xf4\x00\x01" + bytes(6))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(fake_anon, "127.0.0.1", 0)
    socks = f"socks5h://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with aiohttp.ClientSession(connector=make_connector(ONION, Settings(), socks)) as session:
            for _ in range(2):
                with pytest.raises(OnionConnectError, match="requires client authorization") as failure:
                    await session.get(f"{ONION}/system_stats")
                assert isinstance(failure.value, aiohttp.ClientConnectionError)
    finally:
        server.close()
        await server.wait_closed()
    assert len(seen_users) == 2 and seen_users[0] != seen_users[1]
