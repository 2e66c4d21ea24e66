"""A local, faithful Telegram Bot API emulator for tests and demos.

The bot under test talks to it exactly as to api.telegram.org: point
python-telegram-bot at ``base_url``/``base_file_url`` and nothing else changes.
Tests (or a person with curl, see ``control``) play the users::

    async with BotApiEmulator() as emulator:
        bot = emulator.add_bot()                      # bot.token, bot.user (getMe)
        app = (ApplicationBuilder().token(bot.token)
               .base_url(emulator.base_url).base_file_url(emulator.base_file_url).build())
        ...
        bot.inject_text(42, "/demo hello")            # a user writes; the bot gets an Update
        call = await bot.wait_for_call("sendDocument")
        bot.file_bytes(call.result["document"]["file_id"])

Faithful means: documented shapes with every field python-telegram-bot
requires, Telegram's own error descriptions and HTTP statuses, parse_mode
parsing and trimming as TDLib does it, photos recompressed to JPEG sizes, and
files downloadable via getFile. Fault injection (``EmulatedBot.fail``/``hang``)
covers what Telegram does under load: 429 with retry_after, 5xx, lost answers;
``EmulatedBot.enforce_limits`` answers 429 past Telegram's flood limits (``limits``).
``BotApiEmulator(local=True)`` (``--local``) is a local Bot API server as ``telegram-bot-api
--local`` is one: uploads up to 2000 MB, files by path or ``file://`` URI, and ``getFile`` gives
a path on this machine. Waiting is event driven throughout (``BotApiEmulator.wait_for``).

A person plays the users in a browser: the emulator's root serves a web chat
(``webchat``) over the same test API. Standalone: ``main(["--port", "8081",
"--token", "123:ABC"])`` serves until Ctrl-C; ``python <pack> try`` (``tryout``) also
starts ComfyUI with the bot on it.
"""

from .bot import EmulatedBot
from .calls import Call
from .server import BotApiEmulator, main
from .state import StoredFile
from .wire import ApiError, Upload

__all__ = ["ApiError", "BotApiEmulator", "Call", "EmulatedBot", "StoredFile", "Upload", "main"]
