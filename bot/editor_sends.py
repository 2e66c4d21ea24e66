"""Renders the graph editor sends to a chat (Telegram Output's ``send_to_chat``), once the editor
gate approved them (``jobs.editor_proof``): the proof spent in PostgreSQL, the chat let
in as the bot lets users in, the files sent as job results are."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from telegram import Bot

from ..core.config import Settings
from ..store import editor_nonces
from .access import may_receive
from .delivery import deliver_file


async def send_files(bot: Bot, chat_id: int, paths: list[str]) -> list[dict[str, Any]]:
    """Send files to a chat as the dispatcher sends job results (lossless file, then a preview)."""
    sent = []
    for path in paths:
        data = await asyncio.to_thread(Path(path).read_bytes)  # a video can be large: not on the loop
        sent.append(await deliver_file(bot, chat_id, None, os.path.basename(path), data))
    return sent


async def send_approved(bot: Bot, pool, settings: Settings, approval, paths: list[str]) -> str | None:
    """``send_files`` once the ``approval``'s proof is spent in PostgreSQL (it may have been on another
    backend, or before a restart) and if the bot would let its chat in (PostgreSQL's admins, /allow
    and bans with the settings); None when sent, else sends nothing and says why."""
    chat_id = approval.chat
    if not await editor_nonces.spend(pool, approval.nonce, approval.node_id, approval.until):
        return "the editor's proof was already used (on another server of the bot, or before a restart)"
    if not await may_receive(pool, settings, chat_id):
        return f"chat {chat_id} is not an allowed user or admin of the bot"
    await send_files(bot, chat_id, paths)
    return None
