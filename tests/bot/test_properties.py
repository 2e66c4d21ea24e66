"""Property-based tests of the bot's edge: the command parser, and any update through the real application.

The update target builds updates from python-telegram-bot's own classes (hostile text, missing
users, channel posts, edits, anonymous admins, photos, documents, stickers, button presses),
hands each to the emulator (so the bot can answer in its chat) and to ``Application.process_update``
of an application made by ``build_application``, on a real PostgreSQL with the shipped commands.
Hypothesis runs in a worker thread; each example is awaited on the test's event loop.
"""

import asyncio
import collections
import datetime as dtm
import itertools
import re
import secrets
import unicodedata

import asyncpg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from telegram import (
    CallbackQuery,
    Chat,
    Document,
    Message,
    MessageEntity,
    PhotoSize,
    Sticker,
    Update,
    User,
    Video,
)

from comfyui_courier.bot.parsing import clean_text, parse_command, strip_blank
from comfyui_courier.bot.service import build_application
from comfyui_courier.core import i18n
from comfyui_courier.core.config import load_settings
from comfyui_courier.emulator.botapi import BotApiEmulator
from comfyui_courier.jobs.seed import seed_commands
from comfyui_courier.store import Store
from comfyui_courier.tests.support.postgres import dsn_for

EXAMPLES = 500
ALLOWED = tuple(range(111, 175))
"""Senders on the allowlist: many chats, so that Telegram's limit per chat (13 in any 10 s, which the
limiter keeps) does not set the examples' pace."""
STRANGER = 333
ANONYMOUS_ADMIN = 1087968824
NOW = dtm.datetime(2026, 1, 1, tzinfo=dtm.timezone.utc)
HOSTILE = "\x00\x07\x1b\x7f\x85\r\n\t\ud800\udbff\udc00\udfff\u200b\u200c\u200d\u2060\ufeff\u3164\u202e /@_"
COMMANDS = ("demo", "demoedit", "f", "qwen", "help", "start", "status", "cancel", "bench", "compare", "settings",
            "nosuch", "DEMO", "x" * 33)
MIME_TYPES = ("image/png", "image/jpeg", "image/webp", "image/svg+xml", "text/plain", "application/pdf",
              "video/mp4", "", None)

chars = st.one_of(st.characters(), st.sampled_from(HOSTILE))
texts = st.lists(chars, max_size=40).map("".join)  # st.text would drop the surrogates
INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u3164"
blanks = st.lists(st.sampled_from(" \t\n\x00" + INVISIBLE), max_size=8).map("".join)


# --- the command parser ---------------------------------------------------------------

@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(text=st.one_of(texts, st.builds(lambda c, s, a: f"/{c}{s}{a}", st.sampled_from(COMMANDS),
                                       st.sampled_from(["", " ", "\u200b", "@courier_bot ", "@other_bot ", "!"]),
                                       texts)))
def test_parse_command_never_lets_through_what_sql_or_json_cannot_hold(text):
    request = parse_command(text, "courier_bot")
    if request is None:
        return
    assert re.fullmatch(r"[a-z0-9_]{1,32}", request.name)
    args = request.args
    args.encode("utf-8")  # no unpaired surrogate
    assert not any(unicodedata.category(c) == "Cc" and c not in "\n\t" for c in args)
    for end in args[:1] + args[-1:]:  # so a prompt of only invisible characters is empty
        assert not end.isspace() and end not in INVISIBLE
    assert clean_text(args) == args


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(name=st.from_regex(r"[A-Za-z0-9_]{1,32}", fullmatch=True), args=texts,
       addressee=st.sampled_from(["", "@courier_bot", "@Courier_Bot", "@other_bot"]))
def test_parse_command_keeps_the_name_and_the_cleaned_text(name, args, addressee):
    request = parse_command(f"/{name}{addressee} {args}", "courier_bot")
    if addressee == "@other_bot":
        assert request is None
    else:
        assert request.name == name.lower() and request.args == strip_blank(clean_text(args))


# --- any update through the application ---------------------------------------------

group_ids = itertools.count(-1_000_000_000_001, -1)  # a fresh group per update: one group may get 20 messages a minute


def person(user_id: int):
    """A Telegram user with that id and any name, username and language."""
    return st.builds(User, id=st.just(user_id), first_name=texts, is_bot=st.just(False), username=st.none() | texts,
                     language_code=st.sampled_from(["en", "de", "ru", "de-AT", "fr", None]) | texts)


OPTION_WORDS = ("--seed", "--ar", "--size", "--steps", "--n", "--neg", "—seed", "--colour", "7", "16:9", "512x512",
                "99", "reset", "demo")
with_options = st.lists(st.sampled_from(OPTION_WORDS) | texts, max_size=6).map(" ".join)


COMMAND_NAMES = st.sampled_from(("demoedit",) * 3 + ("demo",) * 3 + COMMANDS)


def command_text(names=COMMAND_NAMES):
    return st.builds(lambda name, sep, args: f"/{name}{sep}{args}", names,
                     st.sampled_from(["", " ", " ", "\u200b", "@{bot} ", "@other_bot "]), texts | blanks | with_options)


def content(picture_only: bool = False):
    """Message fields: text (``marked``: with the bot_command entity a client adds) or an attachment with a
    caption; ``picture_only``: a photo or a document with an edit command as its caption."""
    file = dict(file_id=st.just("AgACnosuchfile"), file_unique_id=st.just("AQADnosuch"))
    size = st.one_of(st.none(), st.integers(0, 10**6), st.integers(5 * 2**20, 60_000_000))
    side = st.integers(1, 2560) | st.integers(8000, 30000)
    photo = st.lists(st.builds(PhotoSize, width=side, height=side, file_size=size, **file), min_size=1, max_size=3)
    document = st.builds(Document, mime_type=st.sampled_from(MIME_TYPES), file_size=size, file_name=texts, **file)
    sticker = st.builds(Sticker, width=st.integers(1, 512), height=st.integers(1, 512), is_animated=st.booleans(),
                        is_video=st.booleans(), type=st.just("regular"), **file)
    video = st.builds(Video, width=st.integers(1, 4000), height=st.integers(1, 4000), duration=st.integers(0, 60),
                      file_size=size, **file)
    caption = st.one_of(st.none(), command_text(), command_text(), texts)
    if picture_only:
        caption = command_text(st.just("demoedit"))
        return st.one_of(st.builds(lambda p, c: {"photo": p, "caption": c}, photo, caption),
                         st.builds(lambda d, c: {"document": d, "caption": c}, document, caption))
    text = st.builds(lambda text, marked: {"text": text, "marked": marked}, command_text() | texts,
                     st.sampled_from([True, True, True, False]))
    return st.one_of(
        text, text, text,
        st.builds(lambda p, c: {"photo": p, "caption": c}, photo, caption),
        st.builds(lambda d, c: {"document": d, "caption": c}, document, caption),
        st.builds(lambda s: {"sticker": s}, sticker),
        st.builds(lambda v, c: {"video": v, "caption": c}, video, caption),
    )


def _entities(text: str | None, marked: bool):
    match = re.match(r"/[A-Za-z0-9_]+(@[A-Za-z0-9_]+)?", text or "")
    return [MessageEntity("bot_command", 0, len(match.group()))] if marked and match else None


SCENARIOS = ("person",) * 4 + ("picture",) * 2 + ("group", "stranger", "anonymous", "no sender", "channel_post",
                                                  "edited_channel_post", "edited_message", "callback_query")
GROUP_ANONYMOUS_BOT = User(ANONYMOUS_ADMIN, "Group", True, username="GroupAnonymousBot")


@st.composite
def updates(draw, bot_username: str):
    scenario = draw(st.sampled_from(SCENARIOS))
    kind = scenario if scenario.startswith(("edited", "channel", "callback")) else "message"
    user = draw(person(STRANGER if scenario == "stranger" else draw(st.sampled_from(ALLOWED))))
    sender, sender_chat = user, None
    if kind in ("channel_post", "edited_channel_post"):
        chat = Chat(next(group_ids), Chat.CHANNEL, title=draw(texts))
        sender, sender_chat = None, chat
    elif scenario in ("group", "anonymous"):
        chat = Chat(next(group_ids), Chat.SUPERGROUP, title=draw(texts))
        if scenario == "anonymous":
            sender, sender_chat = GROUP_ANONYMOUS_BOT, chat
    else:
        chat = Chat(user.id, Chat.PRIVATE, first_name=user.first_name)
        sender = None if scenario == "no sender" else user
    fields = draw(content(picture_only=scenario == "picture"))
    for key in ("text", "caption"):
        if fields.get(key):
            fields[key] = fields[key].replace("{bot}", bot_username)
    entities = _entities(fields.get("text"), fields.pop("marked", False))
    reply_to = None
    if draw(st.booleans()):
        replied = draw(content())
        replied.pop("marked", None)
        reply_to = Message(1, NOW, chat, from_user=sender, **replied)
    message = Message(draw(st.integers(2, 10**6)), NOW, chat, from_user=sender, sender_chat=sender_chat,
                      entities=entities, caption_entities=_entities(fields.get("caption"), True),
                      reply_to_message=reply_to, edit_date=NOW if kind.startswith("edited") else None, **fields)
    if kind == "callback_query":
        return Update(0, callback_query=CallbackQuery(str(draw(st.integers(1, 10**9))), user, "instance",
                                                      message=message, data=draw(texts)))
    return Update(0, **{kind: message})


def _private(text=None, *, user_id=ALLOWED[0], kind="message", **fields) -> Update:
    user = User(user_id, "Ann", False, language_code="en")
    chat = Chat(user_id, Chat.PRIVATE, first_name="Ann")
    return Update(0, **{kind: Message(2, NOW, chat, from_user=user, text=text, entities=_entities(text, True),
                                      caption_entities=_entities(fields.get("caption"), True),
                                      edit_date=NOW if kind == "edited_message" else None, **fields)})


def _elsewhere(kind: str, text: str) -> Update:
    chat = Chat(next(group_ids), Chat.CHANNEL if kind == "channel_post" else Chat.SUPERGROUP, title="T")
    sender = None if kind == "channel_post" else GROUP_ANONYMOUS_BOT
    return Update(0, **{kind: Message(2, NOW, chat, from_user=sender, sender_chat=chat, text=text,
                                      entities=_entities(text, True))})


FILE = dict(file_id="AgACnosuchfile", file_unique_id="AQADnosuch")
CORPUS = [  # issue 9's cases, always among the examples
    _private("/demo hel\x00lo \ud800wor\x07ld"),
    _private("/demo \u200b\u200c\u200d\u2060\ufeff"),
    _elsewhere("channel_post", "/demo for everyone"),
    _elsewhere("message", "/demo from an anonymous admin"),
    _private(photo=[PhotoSize(width=20000, height=20000, file_size=900_000, **FILE)], caption="/demoedit"),
    _private(document=Document(mime_type="text/plain", file_size=15, file_name="notes.txt", **FILE),
             caption="/demoedit"),
    _private(sticker=Sticker(width=512, height=512, is_animated=False, is_video=False, type="regular", **FILE)),
    _private("hello?"),
    _private("/demo edited", kind="edited_message"),
    _private("/demo let me in", user_id=STRANGER),
    _private("/nosuch thing"),
    _private("/demoedit", user_id=ALLOWED[1]),
    _private("/demo --seed 7 --ar 16:9 a card"),
    _private("/demo --colour red a card"),
    _private("/f --steps 99 a cat"),
    _private("/help demo"),
    _private("/settings --ar 16:9"),
    _private("/settings"),
    _private("/settings reset"),
]


def catalog_patterns() -> list[tuple[int, str, re.Pattern]]:
    """Every message of every language as (its fixed text's length, key, pattern with {fields} matching anything)."""
    patterns = set()
    for language in i18n.LANGUAGES:
        for key, message in i18n.catalog(language).items():
            for template in message.forms if isinstance(message, i18n.Plural) else (message,):
                parts = re.split(r"\{[^{}]*\}", template)
                patterns.add((len("".join(parts)), key, "(?:.|\n)*".join(map(re.escape, parts))))
    return [(fixed, key, re.compile(pattern)) for fixed, key, pattern in sorted(patterns, reverse=True)]


PATTERNS = catalog_patterns()


def catalog_key(text: str) -> str | None:
    """The key of the catalog message ``text`` is (the most specific match), or ``status_line`` for lines that
    each are one; None when it is no message of the catalog."""
    key = next((key for _, key, pattern in PATTERNS if pattern.fullmatch(text)), None)
    if key is None and "\n" in text and all(catalog_key(line) == "status_line" for line in text.split("\n")):
        return "status_line"
    return key


def test_the_catalog_patterns_tell_messages_apart():
    assert not [key for _, key, pattern in PATTERNS if pattern.fullmatch("anything at all")]
    assert catalog_key(i18n.text("de", "queued", name="demo", position=3)) == "queued"
    assert catalog_key("#1 /demo — running\n#2 /f — queued, position 1") == "status_line"


@pytest.fixture(scope="module")
async def harness(_pg_embedded, tmp_path_factory):
    """The emulator, a fresh database with the shipped commands, and the bot's application, shared by all examples."""
    name = f"courier_properties_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(_pg_embedded.dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        async with BotApiEmulator() as emulator:
            bot = emulator.add_bot()
            bot_settings = load_settings(None, {
                "TELEGRAM_BOT_TOKEN": bot.token, "COURIER_TELEGRAM_API_URL": emulator.url,
                "COURIER_DATABASE_URL": dsn_for(_pg_embedded, name),
                # GroupAnonymousBot's id on the allowlist too: its messages must be refused all the same
                "COURIER_ALLOWED_USERS": ",".join(map(str, (*ALLOWED, ANONYMOUS_ADMIN))),
                "COURIER_MAX_IMAGE_MB": "5", "COURIER_MAX_JOBS_PER_USER": "100000",
                # a queue message goes a moment after its command (2 s at the default): not the examples' pace
                "COURIER_PROGRESS_INTERVAL_S": "0.05"})
            store = await Store.open(bot_settings, tmp_path_factory.mktemp("properties"))
            try:
                await seed_commands(store)
                application = build_application(bot_settings, store)
                errors = []

                async def record(update, context):
                    errors.append(context.error)

                application.add_error_handler(record)
                async with application:
                    yield bot, application, errors
            finally:
                await store.close()
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def feed(harness, update: Update) -> list[str]:
    """Processes one update to the end; the catalog keys of what the bot said, after checking each."""
    bot, application, errors = harness
    errors.clear()
    before = len(bot.calls)
    queued = bot.inject_update(update.to_dict())
    await application.process_update(Update.de_json(queued, application.bot))
    await asyncio.gather(*(task for task in asyncio.all_tasks()  # the chat's queue message, sent after commit,
                           if task.get_name().startswith(("courier-queue-", "courier-refusals"))))  # or a refusal
    if errors:
        raise errors[0]
    said = []
    for call in (c for c in bot.calls[before:] if c.outbound):
        assert call.ok, (call.method, call.failure)
        assert call.method in ("sendMessage", "answerCallbackQuery", "editMessageText"), call.method  # a queue message
        text = call.params.get("text", "")
        key = catalog_key(text) or catalog_key(text.split("\n")[0])  # a queue message: a line per queued job
        assert key is not None, call.params.get("text")
        said.append(key)
    return said


async def test_an_update_drawn_with_the_queue_messages_id_leaves_it_editable(harness):
    """The flake of the test below, made certain: an example's drawn message id was that of its chat's
    queue message. Telegram never gives a message another's id, so the emulator numbers it anew and the
    bot's next edit of its queue message lands (it was "message can't be edited")."""
    bot = harness[0]
    user_id = ALLOWED[-1]
    await feed(harness, _private("/demo a fox", user_id=user_id))
    queue_message = max(c.result["message_id"] for c in bot.calls if c.method == "sendMessage" and c.ok
                        and c.params["chat_id"] == user_id)
    again = _private("/demo a cat", user_id=user_id).to_dict()
    again["message"]["message_id"] = queue_message
    said = await feed(harness, Update.de_json(again, None))
    assert said == ["queued"]
    (edit,) = [c for c in bot.calls if c.method == "editMessageText" and c.params["chat_id"] == user_id][-1:]
    assert edit.ok and edit.params["message_id"] == queue_message and "/demo" in edit.params["text"]


async def test_any_update_is_answered_from_the_catalog_or_not_at_all(harness):
    loop = asyncio.get_running_loop()
    username = harness[1].bot.username
    outcomes = collections.Counter()

    def check(update):
        said = asyncio.run_coroutine_threadsafe(feed(harness, update), loop).result(timeout=60)
        outcomes.update(said or ["silent"])

    for case in CORPUS:
        check = example(update=case)(check)
    check = settings(max_examples=EXAMPLES, deadline=None, database=None,
                     suppress_health_check=list(HealthCheck))(given(update=updates(username))(check))

    await asyncio.to_thread(check)
    # the examples (the corpus, at least) went down the paths this is about, not only the quiet ones
    for key in ("silent", "queued", "not_allowed", "anonymous_sender", "hint_text", "hint_media", "not_an_image",
                "bad_image", "needs_image", "missing_prompt", "unknown_command", "option_unknown",
                "option_bad_number", "help_command", "settings_saved", "settings_cleared"):
        assert outcomes[key], outcomes
