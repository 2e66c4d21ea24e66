"""What the route tests share: the admin token, the node list, a client, a server, a weight-free graph."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass

from aiohttp import ClientSession, web
from yarl import URL

from comfyui_courier.runtime import COURIER, Courier
from comfyui_courier.server_routes import ROUTE_TABLES

TOKEN = "test-admin-token-1234"
NODE_TYPES = frozenset({"CourierTelegramInput", "CourierTelegramOutput", "ImageSharpen", "ImageInvert",
                        "SaveImage", "RepeatImageBatch", "CreateVideo"})


@dataclass
class Api:
    """``await api.get(path)`` / ``api.send(method, path, json=..., token=...)`` -> (status, body, headers).

    ``path`` may also be a whole ``yarl.URL`` (``encoded=True`` sends it byte for byte).

    The body is parsed when it is JSON; ``token=None`` sends no Authorization header.
    """

    url: str
    courier: Courier
    http: ClientSession

    async def send(self, method: str, path: str | URL, *, token: str | None = TOKEN, headers: dict | None = None,
                   **kwargs):
        headers = dict(headers or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        url = path if isinstance(path, URL) else self.url + path
        async with self.http.request(method, url, headers=headers, **kwargs) as response:
            body = await response.read()
            if response.content_type == "application/json":
                body = json.loads(body)
            return response.status, body, response.headers

    async def get(self, path: str, **kwargs):
        return await self.send("GET", path, **kwargs)


async def serve_routes(make_courier):
    """Serve the routes; ``make_courier(url)`` builds the Courier once our URL is known."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = web.Application()
    app[COURIER] = courier = make_courier(url)
    for table in ROUTE_TABLES:
        app.router.add_routes(table)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner, url, courier


def demo_graph(command: str = "mycmd", **output_inputs) -> dict:
    """A weight-free graph in API format, as the editor's graphToPrompt() gives it."""
    return {
        "1": {"class_type": "CourierTelegramInput", "_meta": {"title": "Telegram Input (Courier)"},
              "inputs": {"command": command, "prompt": "a lighthouse", "seed": 1, "width": 256, "height": 256,
                         "image": "", "require_image": False, "chat_id": "", "user_id": ""}},
        "2": {"class_type": "ImageSharpen", "inputs": {"image": ["1", 1], "sharpen_radius": 1, "sigma": 1.0,
                                                       "alpha": 1.0}},
        "3": {"class_type": "CourierTelegramOutput",
              "inputs": {"images": ["2", 0], "filename_prefix": "courier/mycmd", "keep_metadata": False,
                         **output_inputs}},
    }
