"""A throwaway aiohttp server on 127.0.0.1 for tests that need a peer to talk to; a websocket handshake's status."""

import contextlib

import aiohttp
from aiohttp import web


@contextlib.asynccontextmanager
async def serve_app(app: web.Application):
    """Serve ``app`` on 127.0.0.1 (a free port); yields its root URL, cleans up after."""
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def handshake(url: str, host: str, origin: str) -> int:
    """The status of a websocket handshake at ``url`` sent with these ``Host`` and ``Origin``: 101 when it upgraded."""
    async with aiohttp.ClientSession(trust_env=False, timeout=aiohttp.ClientTimeout(total=30)) as http:
        try:
            async with http.ws_connect(url, headers={"Host": host}, origin=origin):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
