"""The local Telegram Bot API emulator (``botapi/``) that ``try`` and the tests talk to; nothing else."""
