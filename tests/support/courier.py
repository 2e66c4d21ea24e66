"""A booted Courier for end-to-end tests: bot on the Bot API emulator, real PostgreSQL, a backend."""

import contextlib
from pathlib import Path

from comfyui_courier.config import load_settings
from comfyui_courier.runtime import Courier


@contextlib.asynccontextmanager
async def running_courier(botapi, botapi_bot, pg_database: str, backend_url: str, data_dir: Path, **env: str):
    """Yields the started Courier (bot and dispatcher ok); ``env`` adds or overrides settings."""
    settings = load_settings(None, {
        "TELEGRAM_BOT_TOKEN": botapi_bot.token,
        "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database,
        "COURIER_PROGRESS_INTERVAL_S": "0",
        **env,
    })
    service = Courier(settings, Path(data_dir), backend_url)
    await service.start()
    try:
        await service.booted()
        assert service.health.state("bot") == "ok", service.health_report()
        assert service.health.state("dispatcher") == "ok", service.health_report()
        yield service
    finally:
        await service.stop()


def replies_to(request: dict):
    """Whether a Bot API call answers ``request`` (message ids count per chat: the chat must match too)."""
    return lambda call: (call.result.get("chat", {}).get("id") == request["chat"]["id"]
                         and call.result.get("reply_to_message", {}).get("message_id") == request["message_id"])
