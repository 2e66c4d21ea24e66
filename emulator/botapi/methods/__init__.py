"""The Bot API methods the emulator answers, one table per group: ``updates`` (getUpdates and
webhooks), ``chats`` (getMe, getChat, chat actions, the command menu), ``messages`` (send, edit and
delete text, answer callback queries), ``media`` (photos, documents, videos, animations, albums,
getFile) and ``inline`` (answerInlineQuery, with the rest of inline mode)."""

from .. import inline
from ..calls import joined
from . import chats, media, messages, updates

METHODS = joined(updates.verbs, chats.verbs, messages.verbs, media.verbs, inline.verbs)
"""Every method by its lower-case name."""
