"""The gettext catalogs: complete in every language, placeholders alike, every id the code uses present.

``catalogs.problems`` is what ``python . catalogs check`` prints; each kind of flaw is shown
to be caught on a copy of the catalogs with that flaw written in.
"""

import shutil
import subprocess
import sys

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.jobs.seed import seed_manifest
from comfyui_courier.tools import catalogs

LANGUAGE_NAMES = {"en": "English", "de": "Deutsch", "ru": "Русский", "zh": "中文", "ja": "日本語", "tr": "Türkçe"}


def test_the_shipped_catalogs_have_no_flaw():
    assert catalogs.problems() == []


def test_there_is_one_po_per_language_and_no_compiled_mo():
    assert sorted(p.name for p in i18n.LOCALES_DIR.iterdir()) == sorted(i18n.LANGUAGES)
    for language in i18n.LANGUAGES:
        assert i18n.po_path(language).is_file()
    assert not list(i18n.LOCALES_DIR.rglob("*.mo"))


@pytest.fixture
def locales(tmp_path):
    """A copy of the shipped catalogs to damage."""
    copy = tmp_path / "locales"
    shutil.copytree(i18n.LOCALES_DIR, copy)
    return copy


def edit(locales, language: str, key: str, string: str | None) -> None:
    """Set (or, with None, delete) one message of a copied catalog."""
    catalog = catalogs.read_catalog(language, locales)
    if string is None:
        catalog.delete(key)
    else:
        catalog[key].string = string
    catalogs.write_catalog(catalog, language, locales)


def test_a_message_missing_from_a_catalog_is_caught(locales):
    edit(locales, "ja", "queued", None)
    assert catalogs.problems(locales) == ["ja: no translation of queued"]


def test_an_untranslated_message_is_caught(locales):
    edit(locales, "tr", "done", "")
    assert catalogs.problems(locales) == ["tr: no translation of done"]


def test_a_placeholder_that_differs_from_english_is_caught(locales):
    edit(locales, "de", "done", "Fertig in {seconds} s.")  # English formats {seconds:.1f}
    edit(locales, "zh", "queued", "/{name} 已加入队列 — 排在第 {place} 位。")
    assert catalogs.problems(locales) == [
        "de: done has placeholders [('seconds', '', '')], English has [('seconds', '', '.1f')]",
        ("zh: queued has placeholders [('name', '', ''), ('place', '', '')], English has "
         "[('name', '', ''), ('position', '', '')]")]


def test_a_placeholder_text_cannot_be_given_is_caught(locales):
    edit(locales, "en", "lang_set", "Now {language}.")
    assert catalogs.problems(locales) == [
        "en: lang_set has a placeholder named like a parameter of i18n.text: ['language']",
        *(f"{language}: lang_set has placeholders [], English has [('language', '', '')]"
          for language in i18n.LANGUAGES[1:])]


@pytest.mark.parametrize(("language", "forms", "shown"), [
    ("en", [1, 2, 21], ["Cancelled 1 job.", "Cancelled 2 jobs.", "Cancelled 21 jobs."]),
    ("de", [1, 4], ["1 Auftrag abgebrochen.", "4 Aufträge abgebrochen."]),
    ("ru", [1, 3, 5, 11, 21, 22, 25], ["Отменена 1 задача.", "Отменены 3 задачи.", "Отменено 5 задач.",
                                       "Отменено 11 задач.", "Отменена 21 задача.", "Отменены 22 задачи.",
                                       "Отменено 25 задач."]),
    ("ja", [1, 7], ["1 件のジョブをキャンセルしました。", "7 件のジョブをキャンセルしました。"]),
])
def test_counts_take_their_language_s_plural_form(language, forms, shown):
    assert [i18n.ntext(language, "cancelled", count) for count in forms] == shown


def test_a_plural_message_lacking_a_form_of_its_language_is_untranslated(locales):
    catalog = catalogs.read_catalog("ru", locales)
    catalog["cancelled"].string = ("Отменена {count} задача.", "Отменены {count} задачи.")  # Russian has 3
    catalogs.write_catalog(catalog, "ru", locales)
    assert catalogs.problems(locales) == ["ru: no translation of cancelled"]
    assert i18n.read_messages("ru", locales).get("cancelled") is None  # English stands in at runtime


def test_a_count_asked_of_a_message_without_plural_forms_is_caught_and_the_other_way_round(locales):
    plural = set(catalogs.used_ids(plural=True))
    assert {"cancelled", "too_many_jobs", "done_unconfirmed"} <= plural
    assert catalogs.problems(locales, plural=plural - {"cancelled"} | {"queued"}) == [
        line for language in i18n.LANGUAGES
        for line in (f"{language}: cancelled has plural forms, but the code uses text()",
                     f"{language}: queued has no plural forms, but the code asks for it with a count (ntext)")]


def test_a_key_the_code_uses_but_no_catalog_has_is_caught():
    used = set(catalogs.used_ids()) | {"brand_new_key"}
    assert catalogs.problems(used=used) == [f"{language}: no translation of brand_new_key"
                                            for language in i18n.LANGUAGES]


def test_a_message_no_code_uses_is_caught():
    used = set(catalogs.used_ids()) - {"hint_text"}
    assert catalogs.problems(used=used) == ["en: hint_text is used by no code"]


def test_extraction_finds_ids_in_every_form_the_code_names_them():
    used = catalogs.used_ids()
    for key, where in {"welcome": "bot/handlers.py",  # context.t(update, KEY)
                       "bench_queued": "jobs/queueing.py",  # i18n.text(language, KEY)
                       "done": "jobs/dispatcher.py",  # say(KEY)
                       "out_of_memory": "jobs/errors.py",  # Problem(KEY, ...)
                       "image_unreadable": "core/imaging.py",  # BadImage(KEY)
                       "image_unavailable": "bot/sink.py",  # InputUnavailable(KEY)
                       "command_demo": "workflows/api/commands.json"}.items():
        assert any(location.startswith(where) for location in used[key]), (key, used.get(key))


def test_shipped_commands_have_a_menu_description_in_every_language():
    for name in seed_manifest():
        for language in i18n.LANGUAGES:
            description = i18n.catalog(language)[f"command_{name}"]
            assert 3 <= len(description) <= 256 and description == description.strip()  # setMyCommands' limits


def test_each_catalog_names_its_own_language():
    assert {language: i18n.text(language, "language_name") for language in i18n.LANGUAGES} == LANGUAGE_NAMES


@pytest.mark.parametrize(("telegram_code", "language"), [
    ("de", "de"), ("DE", "de"), ("de-AT", "de"), ("ru", "ru"), ("zh-hans", "zh"), ("zh-hant", "zh"),
    ("zh_TW", "zh"), ("ja", "ja"), ("tr", "tr"), ("en-GB", "en"),
    ("pt-br", "ru"), ("xx", "ru"), ("", "ru"), (None, "ru"),  # no catalog: the fallback
])
def test_telegram_language_codes_map_onto_the_catalogs(telegram_code, language):
    assert i18n.pick_language(telegram_code, fallback="ru") == language


def test_a_fallback_without_a_catalog_means_english():
    assert i18n.pick_language("pt-br", fallback="pt") == "en"
    assert i18n.text("pt-br", "lang_set") == i18n.text("en", "lang_set")
    assert i18n.text("de-AT", "lang_set") == i18n.text("de", "lang_set")


def test_the_command_line_check_passes_and_port_adds_what_an_old_dict_has(locales, tmp_path):
    check = subprocess.run([sys.executable, str(catalogs.PACK_ROOT), "catalogs", "check"],
                           check=False, capture_output=True, text=True, timeout=60)
    assert (check.returncode, check.stdout.strip()) == (0, "catalogs complete: en, de, ru, zh, ja, tr"), check.stderr
    old = ('MESSAGES = {"en": {"queued": "changed", "ported": "New {thing}", **OTHER},\n'
           '            "de": {"ported": "Neu {thing}"}, "pt": {"ported": "Novo {thing}"}}\n')
    assert catalogs.port(old, locales) == ({"en": ["ported"], "de": ["ported"]}, {"en": ["queued"]})
    assert catalogs.read_catalog("en", locales)["queued"].string == i18n.text("en", "queued", name="{name}",
                                                                             position="{position}")
    assert i18n.read_messages("de", locales)["ported"] == "Neu {thing}"
    assert catalogs.problems(locales, used=[*catalogs.used_ids(), "ported"]) == [
        f"{language}: no translation of ported" for language in ("ru", "zh", "ja", "tr")]
