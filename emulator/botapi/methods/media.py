"""Bot API methods that send or replace files: sendPhoto, sendDocument, sendVideo, sendAnimation,
sendMediaGroup (albums), editMessageMedia, and getFile to fetch one (``state`` stores them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..calls import Call, Verbs
from ..params import read_caption, read_markup
from ..wire import bad_request

if TYPE_CHECKING:
    from ..bot import EmulatedBot

verbs = Verbs()
MAX_DOWNLOAD = 20 * 1024 * 1024
"""getFile refuses larger files, except on a local Bot API server."""
MEDIA_KINDS = ("photo", "video", "animation", "document")


@verbs("sendPhoto", outbound=True)
async def _send_photo(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return await _send_media(bot, call, "photo")


@verbs("sendDocument", outbound=True)
async def _send_document(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return await _send_media(bot, call, "document")


@verbs("sendVideo", outbound=True)
async def _send_video(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return await _send_media(bot, call, "video")


@verbs("sendAnimation", outbound=True)
async def _send_animation(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return await _send_media(bot, call, "animation")


async def _send_media(bot: EmulatedBot, call: Call, kind: str) -> dict[str, Any]:
    """One photo, document, video or animation: a file_id of the bot's, or an uploaded part."""
    params = call.params
    chat = bot.chat(params)
    caption = read_caption(params)
    reply_to, markup = bot.reply_target(chat, params), read_markup(params)
    source = bot.source(call, kind, params.get(kind), kind, f"there is no {kind} in the request")
    return bot.post(chat, bot.sender, {**bot.media_content(kind, source, params), **caption}, reply_to, markup)


@verbs("sendMediaGroup", outbound=True)
async def _send_media_group(bot: EmulatedBot, call: Call) -> list[dict[str, Any]]:
    """An album: each item a message sharing one media_group_id (a single item is a plain message)."""
    params = call.params
    chat = bot.chat(params)
    items = params.get("media")
    if items is None:
        raise bad_request('parameter "media" is required')
    if isinstance(items, str):
        raise bad_request("can't parse media JSON object")
    if not isinstance(items, list):
        raise bad_request("expected an Array of InputMedia")
    if not items:
        raise bad_request("there are no messages to send")
    if len(items) > 10:
        raise bad_request("too many messages to send as an album")
    reply_to = bot.reply_target(chat, params)
    album = []
    for item in items:
        if not isinstance(item, dict):
            raise bad_request("can't parse InputMedia: expected an Object")
        kind = item.get("type")
        if kind == "animation":
            raise bad_request('can\'t parse InputMedia: type "animation" can\'t be used in sendMediaGroup')
        if kind not in ("photo", "video", "document"):
            raise bad_request(f'can\'t parse InputMedia: type "{kind}" is unsupported')
        source = bot.source(call, kind, item.get("media"), None, "can't parse InputMedia: media not found")
        album.append((kind, source, item, read_caption(item)))
    kinds = {kind for kind, *_ in album}
    if "document" in kinds and len(kinds) > 1:
        raise bad_request("document can't be mixed with other media types")
    group = {"media_group_id": str(next(bot.album_ids))} if len(album) > 1 else {}
    return [bot.post(chat, bot.sender, {**group, **bot.media_content(kind, source, item), **caption}, reply_to)
            for kind, source, item, caption in album]


@verbs("editMessageMedia", outbound=True)
async def _edit_message_media(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    """Replaces the photo/video/animation/document of a media message, and its caption with the new media's."""
    message = bot.editable(call.params)
    if not any(kind in message for kind in MEDIA_KINDS):
        raise bad_request("there is no media in the message to edit")
    item = call.params.get("media")
    if not isinstance(item, dict):
        raise bad_request("can't parse InputMedia JSON object")
    kind = item.get("type")
    if kind not in MEDIA_KINDS:
        raise bad_request(f'can\'t parse InputMedia: type "{kind}" is unsupported')
    if "media_group_id" in message and ("document" in message) != (kind == "document"):
        raise bad_request("document can't be mixed with other media types")
    source = bot.source(call, kind, item.get("media"), None, "can't parse InputMedia: media not found")
    content = {**bot.media_content(kind, source, item), **read_caption(item)}
    return bot.edit(message, content, (*MEDIA_KINDS, "caption", "caption_entities", "has_media_spoiler"),
                    read_markup(call.params))


@verbs("getFile")
async def _get_file(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    file_id = call.params.get("file_id")
    if not file_id:
        raise bad_request("file_id not specified")
    stored = bot.files.get(str(file_id))
    if stored is None:
        raise bad_request("invalid file_id")
    if len(stored.data) > MAX_DOWNLOAD and not bot.emulator.local:
        raise bad_request("file is too big")
    return {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "file_size": len(stored.data),
            "file_path": bot.emulator.local_path(bot, stored) if bot.emulator.local else stored.file_path}

