"""User-facing text: gettext catalogs, one ``locales/<language>/LC_MESSAGES/courier.po`` per language.

Below both ``bot`` and ``jobs``: the bot's replies, the dispatcher's status texts and the
ComfyUI problems of ``jobs/errors.py`` all come from here, as ``text(language, key, **params)``.

Message ids are keys (``queued``, ``bad_image``), and English is a catalog like the others.
Keys rather than English msgids because the code passes ids around as data
(``Problem(key, params)``, ``BadImage.key``, ``InputUnavailable(key)``), and because rewording
the English text must not orphan five translations (an English msgid changes with every fix of
a typo). Translators read ``en`` beside their own catalog. Placeholders are ``str.format``
fields and must be the same in every language; ``python . catalogs check`` (``catalogs.py``)
lists what a catalog lacks against what the code uses, as Babel extracts it (``babel.cfg``).

The ``.po`` files are read as they are, at runtime (Babel's ``read_po``): nothing is compiled,
so no ``.mo`` can go stale. Untranslated and fuzzy entries count as missing and fall back to
English.

A count is worded with gettext's plural forms: the entry has ``msgid_plural`` (the same key) and
one ``msgstr[n]`` per form its language's ``Plural-Forms`` header counts (Russian 3, German 2,
Japanese 1), and the code asks for it with ``ntext(language, key, count)``, as ``ngettext`` would.
"""

from __future__ import annotations

import dataclasses
import functools
import gettext
from collections.abc import Callable, Mapping
from pathlib import Path

LOCALES_DIR = Path(__file__).resolve().parent.parent / "locales"
DOMAIN = "courier"
LANGUAGES = ("en", "de", "ru", "zh", "ja", "tr")
"""Every language with a catalog, in the order ``/lang`` offers them; English is the fallback of all."""


def po_path(language: str, locales_dir: Path = LOCALES_DIR) -> Path:
    return locales_dir / language / "LC_MESSAGES" / f"{DOMAIN}.po"


@dataclasses.dataclass(frozen=True)
class Plural:
    """A message with plural forms: one per form of its language, and that language's rule."""

    forms: tuple[str, ...]
    rule: Callable[[int], int] = dataclasses.field(compare=False)  # count -> form (the Plural-Forms expression)

    def form(self, count: int) -> str:
        return self.forms[min(self.rule(count), len(self.forms) - 1)]


Message = str | Plural


def read_messages(language: str, locales_dir: Path = LOCALES_DIR) -> dict[str, Message]:
    """The translated messages of one ``.po`` file, by id (no untranslated or fuzzy entries; a plural
    entry only with all its forms)."""
    from babel.messages.pofile import read_po  # on first use: ComfyUI's start does not wait for Babel

    with po_path(language, locales_dir).open("rb") as po:
        entries = read_po(po, domain=DOMAIN)
    rule = gettext.c2py(entries.plural_expr)
    messages: dict[str, Message] = {}
    for entry in entries:
        if not entry.id or entry.fuzzy:
            continue
        if entry.pluralizable and all(entry.string):
            messages[entry.id[0]] = Plural(tuple(entry.string), rule)
        elif not entry.pluralizable and entry.string:
            messages[entry.id] = entry.string
    return messages


def language_of(code: str | None) -> str | None:
    """The catalog for a Telegram ``language_code`` (an IETF tag: ``de``, ``pt-br``, ``zh-hans``), or None.

    Regional and script variants take their language's catalog (``de-at`` -> ``de``; ``zh-hant``
    and ``zh-tw`` -> ``zh``, written in simplified characters, which is closer than English).
    """
    primary = (code or "").replace("_", "-").split("-")[0].strip().lower()
    return primary if primary in LANGUAGES else None


def pick_language(user_language: str | None, fallback: str) -> str:
    """The user's language where we have it, else ``fallback`` (COURIER_LANGUAGE), else English."""
    return language_of(user_language) or language_of(fallback) or "en"


def catalog(language: str) -> Mapping[str, Message]:
    """Every message in ``language`` (a code ``language_of`` maps; English for others), English where
    a translation is missing."""
    return _catalog(language_of(language) or "en")


@functools.cache
def _catalog(language: str) -> Mapping[str, Message]:
    english = read_messages("en")
    return english if language == "en" else {**english, **read_messages(language)}


def message_id(key: str) -> str:
    """``key`` unchanged: marks a catalog key named before its text is asked for (a constant), so the
    catalog check (``babel.cfg``) counts it as used."""
    return key


def text(language: str, key: str, **params) -> str:
    return catalog(language)[key].format(**params)


def ntext(language: str, key: str, count: int, **params) -> str:
    """``ngettext``: the form of plural message ``key`` that ``count`` takes in ``language`` (``{count}`` in it)."""
    return catalog(language)[key].form(count).format(count=count, **params)


def command_description(language: str, name: str, description: str, shipped: bool) -> str:
    """What the menu and ``/help`` say about a command: a shipped one's catalog text
    (``command_<name>``), a published one's own description as its publisher wrote it."""
    return catalog(language).get(f"command_{name}", description) if shipped else description
