"""Upkeep of the gettext catalogs: ``python <pack folder> catalogs check|port``.

``check`` compares what the code uses (message ids extracted with Babel as ``babel.cfg`` says,
plus ``command_<name>`` for each shipped command) with every ``.po``: ids a catalog lacks (or
has untranslated or fuzzy), ids no code uses, placeholders that differ from English, and plural
messages (``ntext``) that are not plural in a catalog, or the other way round (a plural message
lacking one of the forms its language's ``Plural-Forms`` header counts is untranslated). It
prints one line per problem and exits 1 if there is any; ``tests/test_i18n.py`` runs the same.

``port FILE`` (``-`` for stdin) adds to the catalogs the messages of an old-style
``MESSAGES = {"en": {...}, "de": {...}}`` dict, such as ``git show BRANCH:i18n.py`` of a branch
made before the catalogs: only ids a catalog lacks, for the languages the dict has. It names
the ids whose text differs from the catalog's (a branch that reworded a message) without
touching them, and ``check`` then names the translations still to write.
"""

from __future__ import annotations

import argparse
import ast
import string
import sys
from collections.abc import Iterable
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po, write_po

from ..core import i18n
from ..jobs.seed import SEED_DIR, seed_manifest

PACK_ROOT = Path(__file__).resolve().parent.parent
SHIPPED_COMMAND_PREFIX = "command_"
RESERVED_NAMES = {"language", "key"}  # text(language, key, **params) could not be given them
PLURAL_KEYWORDS = {"nt": (2,), "ntext": (2,)}
"""The calls of ``babel.cfg`` whose id is a plural message."""


def used_ids(root: Path = PACK_ROOT, seed_dir: Path = SEED_DIR, *, plural: bool = False) -> dict[str, list[str]]:
    """Every message id the code uses, with where (``path:line``); ``plural``: only those it asks for
    with a count (``PLURAL_KEYWORDS``)."""
    with (PACK_ROOT / "babel.cfg").open(encoding="utf-8") as config:
        method_map, options_map = parse_mapping_cfg(config)
    if plural:
        options_map = {pattern: {**options, "keywords": PLURAL_KEYWORDS} for pattern, options in options_map.items()}
    used: dict[str, list[str]] = {}
    for path, line, message, _comments, _context in extract_from_dir(root, method_map, options_map,
                                                                      keywords={} if plural else DEFAULT_KEYWORDS):
        if isinstance(message, str):
            used.setdefault(message, []).append(f"{path}:{line}")
    if not plural:
        for name in seed_manifest(seed_dir):
            used.setdefault(f"{SHIPPED_COMMAND_PREFIX}{name}", []).append("workflows/api/commands.json")
    return used


def placeholders(message: i18n.Message) -> set[tuple[str, str, str]]:
    """The ``str.format`` fields of ``message`` (of all its forms) as (name, conversion, format spec)."""
    templates = message.forms if isinstance(message, i18n.Plural) else (message,)
    return {(name, conversion or "", spec or "") for template in templates
            for _, name, spec, conversion in string.Formatter().parse(template) if name is not None}


def problems(locales_dir: Path = i18n.LOCALES_DIR, used: Iterable[str] | None = None,
             plural: Iterable[str] | None = None) -> list[str]:
    """One line per flaw in the catalogs, against the ids the code uses (``used_ids()`` by default)
    and those of them it asks for with a count (``used_ids(plural=True)``)."""
    used = set(used_ids() if used is None else used)
    plural = set(used_ids(plural=True) if plural is None else plural)
    catalogs = {language: i18n.read_messages(language, locales_dir) for language in i18n.LANGUAGES}
    english = catalogs["en"]
    plural_problems = []
    for language, messages in catalogs.items():  # a form left out reads as no translation (Babel pads them)
        for key in sorted(messages.keys() & used):
            is_plural = isinstance(messages[key], i18n.Plural)
            if is_plural != (key in plural):
                found_kind = "has plural forms" if is_plural else "has no plural forms"
                asked = "the code asks for it with a count (ntext)" if key in plural else "the code uses text()"
                plural_problems.append(f"{language}: {key} {found_kind}, but {asked}")
    found = [f"{language}: no translation of {key}" for language, messages in catalogs.items()
             for key in sorted(used - messages.keys())]
    found += [f"en: {key} is used by no code" for key in sorted(english.keys() - used)]
    found += [f"en: {key} has a placeholder named like a parameter of i18n.text: {sorted(names)}"
              for key, template in english.items()
              if (names := {name for name, _, _ in placeholders(template)} & RESERVED_NAMES)]
    for language, messages in catalogs.items():
        found += [f"{language}: {key} is not in the English catalog"
                  for key in sorted(messages.keys() - english.keys())]
        found += [f"{language}: {key} has placeholders {sorted(placeholders(messages[key]))}, English has "
                  f"{sorted(placeholders(english[key]))}" for key in sorted(messages.keys() & english.keys())
                  if placeholders(messages[key]) != placeholders(english[key])]
    return found + plural_problems


def read_catalog(language: str, locales_dir: Path = i18n.LOCALES_DIR) -> Catalog:
    with i18n.po_path(language, locales_dir).open("rb") as po:
        return read_po(po, locale=language, domain=i18n.DOMAIN)


def write_catalog(catalog: Catalog, language: str, locales_dir: Path = i18n.LOCALES_DIR) -> None:
    """Write a ``.po`` the way all of ours are written: no wrapping, no source locations."""
    path = i18n.po_path(language, locales_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as po:
        write_po(po, catalog, width=0, no_location=True, omit_header=False)


def old_style_messages(source: str) -> dict[str, dict[str, str]]:
    """The string entries of a ``MESSAGES = {language: {key: text}}`` literal in Python source."""
    for node in ast.walk(ast.parse(source)):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "MESSAGES" for t in targets) and isinstance(node.value, ast.Dict):
            return {ast.literal_eval(language): {ast.literal_eval(key): ast.literal_eval(value)
                                                 for key, value in zip(texts.keys, texts.values, strict=True)
                                                 if key is not None}  # None: a ``**spread``
                    for language, texts in zip(node.value.keys, node.value.values, strict=True)}
    raise ValueError("no MESSAGES = {...} dict in this source")


def port(source: str, locales_dir: Path = i18n.LOCALES_DIR) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Add the messages of an old-style dict that the catalogs lack.

    Returns (ids added, ids whose text differs from the catalog's and were left as they are), per language.
    """
    added, differing = {}, {}
    for language, texts in old_style_messages(source).items():
        if language not in i18n.LANGUAGES:
            continue
        catalog = read_catalog(language, locales_dir)
        new = [key for key in texts if not (catalog.get(key) and catalog[key].string)]
        for key in new:
            catalog.add(key, texts[key])
        if new:
            write_catalog(catalog, language, locales_dir)
            added[language] = new
        if changed := [key for key in texts if key not in new and catalog[key].string != texts[key]]:
            differing[language] = changed
    return added, differing


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python <comfyui-courier folder> catalogs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("check", help="list what the catalogs lack; exit 1 if anything")
    port_parser = sub.add_parser("port", help="add the messages of an old-style MESSAGES dict")
    port_parser.add_argument("file", help="a Python file with MESSAGES = {...}, or - for stdin")
    args = parser.parse_args(argv)
    if args.action == "port":
        source = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        added, differing = port(source)
        for language, keys in added.items():
            print(f"{language}: added {', '.join(keys)}")
        for language, keys in differing.items():
            print(f"{language}: kept the catalog's text of {', '.join(keys)} (the file words them differently)")
    found = problems()
    print("\n".join(found) if found else f"catalogs complete: {', '.join(i18n.LANGUAGES)}")
    return 1 if found else 0
