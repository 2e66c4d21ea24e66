"""Hooks Courier onto ComfyUI's aiohttp app: routes now, services with the app.

ComfyUI loads packs before ``add_routes()`` and ``AppRunner.setup()``, so routes
and a cleanup context added here take effect. ComfyUI never runs cleanup on
Ctrl-C/SIGTERM, so nothing here relies on teardown: jobs hold expiring leases.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from .core.logs import get_logger
from .runtime import COURIER, Courier
from .server_routes import ROUTE_TABLES
from .server_routes.host_guard import host_guard

log = get_logger("host")


def attach(prompt_server) -> None:
    """Register the Host check, the editor gate, routes and the service lifecycle on ComfyUI's PromptServer."""
    app: web.Application = prompt_server.app
    if app.router.frozen:
        log.error("ComfyUI's router is already frozen; Courier is off")
        return
    courier = Courier.for_comfyui(*_comfyui_locations())
    app[COURIER] = courier
    from comfy.cli_args import args

    # before ComfyUI's own: a refused Host or Origin goes no further
    app.middlewares.insert(0, host_guard(courier.settings, args.enable_cors_header))
    prompt_server.add_on_prompt_handler(courier.editor_gate.on_prompt)
    for table in ROUTE_TABLES:  # ComfyUI serves its route table under / and /api/ (the frontend uses /api)
        for route in table:
            prompt_server.routes.route(route.method, route.path, **route.kwargs)(route.handler)
    app.cleanup_ctx.append(_courier_lifecycle)


def _comfyui_locations() -> tuple[Path, str, str]:
    """(user directory, loopback URL of this ComfyUI, its --listen value)."""
    import folder_paths
    from comfy.cli_args import args

    listen = args.listen or "127.0.0.1"
    host = listen.split(",")[0].strip()
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return Path(folder_paths.get_user_directory()), f"http://{host}:{args.port}", listen


async def _courier_lifecycle(app: web.Application):
    courier = app[COURIER]
    await courier.start()
    yield
    await courier.stop()

