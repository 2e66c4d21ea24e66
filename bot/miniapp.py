"""The Mini App form: ``/app``'s keyboard button, the page's URL, and the page's answer.

The page (``miniapp/``) is static and talks to no server of ours: what it shows travels in its
URL's fragment, which a browser never sends to the page's host, and its answer travels back
through Telegram as a ``web_app_data`` message: ``{"v": 1, "line": "/img a cat --size 128"}``.
The line is run exactly as if the user had typed it (``handlers.run_command``'s path: the same
parser, options and use case), so nothing in the URL is trusted: a user may edit it, and the
page's ranges are a convenience, not a check.

The fragment is ``courier=1.<base64url of raw-deflated JSON>``, the version first. Past
``MAX_URL_CHARS`` (some clients cut longer ones) the page gets its words only, and shows a text
field for the command line in place of the form.
"""

from __future__ import annotations

import base64
import json
import zlib

from telegram import KeyboardButton, ReplyKeyboardMarkup, Update, WebAppInfo

from ..core import i18n
from ..jobs.options import LORA_WEIGHTS, command_options, listing
from ..jobs.workflow import WorkflowError
from ..store import backends, commands
from .context import CourierContext

VERSION = 1
MAX_URL_CHARS = 2000
MAX_DATA_BYTES = 4096
"""What Telegram takes from ``sendData``."""


def words(language: str) -> dict[str, str]:
    """The page's words in ``language``, from the bot's catalog (the page has none of its own)."""
    def say(key: str) -> str:
        return i18n.text(language, key)

    return {"title": say("miniapp_title"), "command": say("miniapp_command"), "prompt": say("miniapp_prompt"),
            "model": say("miniapp_model"), "default": say("miniapp_default"), "lora": say("miniapp_lora"),
            "weight": say("miniapp_weight"), "size": say("miniapp_size"), "ar": say("miniapp_ar"),
            "steps": say("miniapp_steps"), "seed": say("miniapp_seed"), "neg": say("miniapp_neg"),
            "strength": say("miniapp_strength"), "line": say("miniapp_line"), "send": say("miniapp_send")}


def command_entry(command: commands.Command) -> dict | None:
    """What the page shows of one command: its name, options with their ranges, and the widest
    ``--ar``; None where its graph's options cannot be read (the typed command says why)."""
    try:
        spec = command_options(command.workflow)
    except WorkflowError:
        return None
    entry = {"name": command.name, "options": listing(spec)}
    if spec.offers("size"):
        entry["ar"] = spec.max_ratio
    return entry


def encode(payload: dict) -> str:
    """``1.<base64url of raw-deflated JSON>`` (no padding)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = packer.compress(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()) + packer.flush()
    return f"{VERSION}." + base64.urlsafe_b64encode(packed).decode().rstrip("=")


def page_url(base: str, language: str, listed: list[commands.Command], models: dict[str, set[str]]) -> str:
    """The page's URL for a user: ``base`` with the fragment of what the form shows in ``language``:
    the commands of ``listed``, and the model files where a command takes them; its words only
    (a text field) where that would pass ``MAX_URL_CHARS``."""
    said = words(language)
    entries = [entry for entry in map(command_entry, listed) if entry is not None]
    payload = {"words": said, "commands": entries}
    if any(option["name"] in ("model", "lora") for entry in entries for option in entry["options"]):
        payload |= {"checkpoints": sorted(models.get("checkpoints", ())), "loras": sorted(models.get("loras", ())),
                    "weights": list(LORA_WEIGHTS)}
    url = f"{base}#courier={encode(payload)}"
    return url if len(url) <= MAX_URL_CHARS else f"{base}#courier={encode({'words': said})}"


async def keyboard(update: Update, context: CourierContext) -> ReplyKeyboardMarkup | None:
    """The reply keyboard with the form's button, for the user behind ``update``; None where no
    ``COURIER_MINIAPP_URL`` is set."""
    base = context.settings.miniapp_url
    if not base:
        return None
    language = context.language(update)
    url = page_url(base, language, await commands.list_commands(context.pool, enabled_only=True),
                   await backends.model_choices(context.pool))
    button = KeyboardButton(i18n.text(language, "miniapp_button"), web_app=WebAppInfo(url))
    return ReplyKeyboardMarkup([[button]], resize_keyboard=True)


async def app(update: Update, context: CourierContext) -> None:
    """``/app``: the keyboard with the form's button, or how to set it up."""
    markup = await keyboard(update, context)
    said = context.t(update, "miniapp_open") if markup is not None else context.t(update, "miniapp_unset")
    await update.effective_message.reply_text(said, reply_markup=markup)


def sent_line(message) -> str | None:
    """The command line of the page's answer in ``message`` (``web_app_data``), None if it is none:
    not JSON, not ``{"v": 1, "line": "..."}``, or larger than Telegram lets a page send."""
    data = message.web_app_data.data if message is not None and message.web_app_data is not None else None
    if data is None or len(data.encode("utf-8", "replace")) > MAX_DATA_BYTES:
        return None
    try:
        answer = json.loads(data)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("v") != VERSION or not isinstance(answer.get("line"), str):
        return None
    return answer["line"]
