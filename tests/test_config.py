import logging

import pytest

from comfyui_courier.core.config import Secret, SettingsError, load_settings


def test_environment_overrides_the_file(tmp_path):
    file = tmp_path / "courier.toml"
    file.write_text('language = "de"\nmax_jobs_per_user = 3\nallowed_users = [1, 2]\n')
    settings = load_settings(file, {"COURIER_LANGUAGE": "ru", "COURIER_ALLOWED_USERS": "7, 8"})
    assert settings.language == "ru"
    assert settings.max_jobs_per_user == 3
    assert settings.allowed_users == [7, 8]


def test_allowed_users_take_ids_and_usernames_and_quotas_default_to_none():
    settings = load_settings(None, {"COURIER_ALLOWED_USERS": "7, @Ada_Lovelace"})
    assert settings.allowed_users == [7, "@ada_lovelace"]
    assert (settings.quota_hour, settings.quota_day, settings.retention_days) == (0, 0, 30)


def test_a_local_bot_api_server_takes_2000_mb_unless_the_limit_is_set():
    assert load_settings(None, {}).upload_limit_mb == 50
    local = load_settings(None, {"COURIER_TELEGRAM_LOCAL_MODE": "1"})
    assert local.telegram_local_mode is True and local.upload_limit_mb == 2000
    chosen = load_settings(None, {"COURIER_TELEGRAM_LOCAL_MODE": "on", "COURIER_UPLOAD_LIMIT_MB": "300"})
    assert chosen.upload_limit_mb == 300


def test_missing_file_gives_defaults():
    settings = load_settings(None, {})
    assert settings.telegram_bot_token.reveal() == ""
    assert settings.backends == [] and settings.progress_interval_s == 3.0


@pytest.mark.parametrize("content, key", [
    ('no_such_setting = 1\n', "no_such_setting"),
    ('max_jobs_per_user = "many"\n', "max_jobs_per_user"),
    ('anyone_enabled = "perhaps"\n', "anyone_enabled"),
    ('progress_interval_s = -1\n', "progress_interval_s"),
    ('allowed_users = ["abc"]\n', "allowed_users"),
    ('allowed_users = ["@a b"]\n', "allowed_users"),
    ('allowed_users = ["@abc"]\n', "allowed_users"),  # Telegram usernames have 5 to 32 characters
    ('quota_hour = -1\n', "quota_hour"),
])
def test_bad_file_values_name_the_key(tmp_path, content, key):
    file = tmp_path / "courier.toml"
    file.write_text(content)
    with pytest.raises(SettingsError, match=key):
        load_settings(file, {})


def test_bad_environment_value_names_the_variable():
    with pytest.raises(SettingsError, match="COURIER_MAX_JOBS_PER_USER"):
        load_settings(None, {"COURIER_MAX_JOBS_PER_USER": "1.5"})


def test_invalid_toml_is_a_settings_error(tmp_path):
    file = tmp_path / "courier.toml"
    file.write_text("language = \n")
    with pytest.raises(SettingsError, match="courier.toml"):
        load_settings(file, {})


def test_secrets_never_show(caplog):
    token = "123456:AAHsecretsecretsecret"
    settings = load_settings(None, {"TELEGRAM_BOT_TOKEN": token,
                                    "COURIER_DATABASE_URL": "postgresql://u:pw@h/db"})
    assert settings.telegram_bot_token.reveal() == token
    with caplog.at_level(logging.INFO):
        logging.getLogger("t").info("settings %s %r", settings, settings)
    shown = repr(settings) + str(settings) + f"{settings.telegram_bot_token}"
    for text in (shown, caplog.text):
        assert token not in text and "pw@" not in text
    assert Secret("x") == Secret("x") and not Secret("")
