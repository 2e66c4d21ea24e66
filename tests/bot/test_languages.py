"""Languages end to end: real python-telegram-bot on the Bot API emulator, real PostgreSQL, the dispatcher
on the transcript-faithful fake ComfyUI. Telegram's language_code picks the catalog, /lang overrides it
(by name or by button) and the choice outlives the bot; the command menu is published per language."""

import json

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import running_courier

USER = 111
OTHER = 222
DEFAULT_SCOPE = json.dumps({"type": "default"}, sort_keys=True)


def courier_for(botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    return running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                           COURIER_ALLOWED_USERS=f"{USER},{OTHER}")


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    async with courier_for(botapi, botapi_bot, pg_database, fake_comfy, tmp_path) as service:
        yield service


def said(language: str, key: str, **params) -> str:
    return i18n.text(language, key, **params)


async def reply(bot, text: str, method: str = "sendMessage", timeout: float = 10):
    """The call that showed ``text`` (exactly), waiting for it."""
    try:
        return await bot.wait_for_call(method, where=lambda c: c.params.get("text") == text, timeout=timeout)
    except TimeoutError:
        raise AssertionError(
            f"never sent {text!r}; the bot sent {[c.params.get('text') for c in bot.outbox]}") from None


async def job_status(bot, language: str, name: str):
    """The job's status message: its "Queued" reply (its first /demo has no estimate yet), or the
    dispatcher's "running" if that came first."""
    texts = (said(language, "queued", name=name, position=1), said(language, "running", name=name),
             said(language, "queued_no_estimate", name=name, position=1))  # a command without runs yet
    try:
        return await bot.wait_for_call("sendMessage", where=lambda c: c.params.get("text") in texts, timeout=10)
    except TimeoutError:
        raise AssertionError(
            f"never sent any of {texts}; the bot sent {[c.params.get('text') for c in bot.outbox]}") from None


async def chosen_language(courier, user_id: int) -> str | None:
    async with courier.store.pool.acquire() as conn:
        return await conn.fetchval("SELECT language FROM courier_users WHERE user_id = $1", user_id)


async def test_a_german_user_gets_german_replies_help_and_job_status(courier, botapi, botapi_bot):
    botapi.add_user(USER, "Ada", language_code="de")
    botapi_bot.inject_text(USER, "/help")
    help_text = (await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"].startswith(
        "Befehle:"))).params["text"]
    assert f"/demo — {said('de', 'command_demo')}" in help_text
    botapi_bot.inject_text(USER, "/demo hallo")
    await job_status(botapi_bot, "de", "demo")
    await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].startswith("Fertig in"),
                                   timeout=30)


async def test_lang_with_a_code_switches_and_the_choice_survives_a_restart(
        courier, botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    botapi.add_user(USER, "Ada", language_code="de")
    botapi_bot.inject_text(USER, "/lang tr")
    await reply(botapi_bot, said("tr", "lang_set"))
    assert await chosen_language(courier, USER) == "tr"
    botapi_bot.inject_text(USER, "/status")
    await reply(botapi_bot, said("tr", "status_none"))

    await courier.stop()
    async with courier_for(botapi, botapi_bot, pg_database, fake_comfy, tmp_path / "again"):
        botapi_bot.inject_text(USER, "/cancel")
        await reply(botapi_bot, said("tr", "nothing_to_cancel"))
        botapi_bot.inject_text(USER, "/demo merhaba")  # the job's own messages too
        await job_status(botapi_bot, "tr", "demo")
        await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].endswith(
            "saniyede tamamlandı."), timeout=30)


async def test_lang_buttons_offer_every_language_and_a_press_sets_the_pressers(courier, botapi, botapi_bot):
    botapi.add_user(USER, "Ada", language_code="en")
    botapi.add_user(OTHER, "Bo", language_code="ru")
    botapi_bot.inject_text(USER, "/lang")
    choice = await reply(botapi_bot, said("en", "lang_choose", current="English", codes="en, de, ru, zh, ja, tr"))
    buttons = [b for row in choice.params["reply_markup"]["inline_keyboard"] for b in row]
    assert [(b["text"], b["callback_data"]) for b in buttons] == [
        ("English", "lang:en"), ("Deutsch", "lang:de"), ("Русский", "lang:ru"),
        ("中文", "lang:zh"), ("日本語", "lang:ja"), ("Türkçe", "lang:tr")]

    query = botapi_bot.inject_callback_query(USER, choice.result["message_id"], "lang:ja")
    answer = await botapi_bot.wait_for_call("answerCallbackQuery",
                                            where=lambda c: c.params["callback_query_id"] == query["id"])
    assert answer.params["text"] == said("ja", "lang_set")
    await reply(botapi_bot, said("ja", "lang_set"), method="editMessageText")
    assert (await chosen_language(courier, USER), await chosen_language(courier, OTHER)) == ("ja", None)
    botapi_bot.inject_text(USER, "/status")
    await reply(botapi_bot, said("ja", "status_none"))
    botapi_bot.inject_text(OTHER, "/status")  # someone else keeps their own language
    await reply(botapi_bot, said("ru", "status_none"))


async def test_an_unknown_code_or_forged_button_is_refused_in_the_users_language(courier, botapi, botapi_bot):
    botapi.add_user(USER, "Ada", language_code="zh-hans")
    botapi_bot.inject_text(USER, "/lang klingon")
    await reply(botapi_bot, said("zh", "lang_unknown", code="klingon", codes="en, de, ru, zh, ja, tr"))
    forged = {"id": "forged-1", "from": botapi.user(USER), "chat_instance": "1", "data": "lang:pt"}
    botapi_bot.inject_update({"callback_query": forged})
    answer = await botapi_bot.wait_for_call("answerCallbackQuery",
                                            where=lambda c: c.params["callback_query_id"] == "forged-1")
    assert answer.params["text"] == said("zh", "button_stale")  # answered: the client's spinner stops
    botapi_bot.inject_text(USER, "/status")
    await reply(botapi_bot, said("zh", "status_none"))
    assert await chosen_language(courier, USER) is None


async def test_the_command_menu_is_published_in_every_language(courier, botapi_bot):
    for language in i18n.LANGUAGES:
        menu = {c["command"]: c["description"] for c in botapi_bot.commands[(DEFAULT_SCOPE, language)]}
        assert menu["demo"] == said(language, "command_demo")
        assert menu["lang"] == said(language, "menu_lang")
        assert menu["settings"] == said(language, "menu_settings")
        assert menu["history"] == said(language, "menu_history")
        assert menu["models"] == said(language, "menu_models")
        assert menu["app"] == said(language, "menu_app")
        assert list(menu)[-10:] == ["help", "status", "cancel", "history", "quota", "lang", "forget", "settings",
                                    "models", "app"]
    fallback = {c["command"]: c["description"] for c in botapi_bot.commands[(DEFAULT_SCOPE, "")]}
    assert fallback["help"] == said("en", "menu_help")  # COURIER_LANGUAGE for every other language
