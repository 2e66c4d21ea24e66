"""A throwaway aiohttp server on 127.0.0.1 for tests that need a peer to talk to."""

import contextlib

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
