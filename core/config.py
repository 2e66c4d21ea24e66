"""One typed settings object: environment variables over an optional courier.toml.

Every setting has a TOML key (the field name) and an environment variable. The
environment wins. Unknown TOML keys and bad values raise ``SettingsError`` naming
the key; secrets are wrapped in ``Secret`` so no repr or log line can show them.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - ComfyUI still supports 3.10
    import tomli as tomllib

CONFIG_FILE_NAME = "courier.toml"
LOCAL_UPLOAD_LIMIT_MB = 2000.0
"""What a local Bot API server (``telegram-bot-api --local``) takes from the bot."""


class SettingsError(ValueError):
    """A setting is unknown or has a bad value; the message names the key."""


class Secret:
    """A string that never shows itself in repr/str/format."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret('**********')" if self._value else "Secret('')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)


EVERYONE = "*"
"""In ``COURIER_ALLOWED_USERS``: every Telegram user may use the bot."""


def user_ref(text: str) -> int | str:
    """A user in a list setting: a Telegram id, ``@username`` (kept lower case, with the ``@``), or ``*``."""
    if text == EVERYONE:
        return text
    if text.startswith("@"):
        name = text[1:].lower()
        if not (5 <= len(name) <= 32 and name.replace("_", "").isalnum() and name.isascii()):
            raise ValueError(f"{text!r} is not a Telegram username")
        return "@" + name
    return int(text)


def host_name(text: str) -> str:
    """A name in ``allowed_hosts``: lower case, without a port or the root's trailing dot."""
    name = text.strip().lower().rstrip(".")
    if not name or any(c in name for c in ":/[]@ *") or not name.isascii():
        raise ValueError(f"{text!r} is not a host name (give the name only, without a port)")
    return name


def _field(env: str, default: Any, help: str, **kw: Any) -> Any:
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default),
                                 metadata={"env": env, "help": help, **kw})
    return dataclasses.field(default=default, metadata={"env": env, "help": help, **kw})


@dataclasses.dataclass(frozen=True)
class Settings:
    telegram_bot_token: Secret = _field("TELEGRAM_BOT_TOKEN", Secret(""),
                                        "Bot token from @BotFather; the bot starts only when set")
    telegram_api_url: str = _field("COURIER_TELEGRAM_API_URL", "https://api.telegram.org",
                                   "Bot API server (a local Bot API server or the test emulator)")
    telegram_local_mode: bool = _field("COURIER_TELEGRAM_LOCAL_MODE", False,
                                       "The Bot API server runs in local mode on this machine (telegram-bot-api "
                                       "--local): results up to 2000 MB go to it as files, and users' files are "
                                       "read from its disk")
    allowed_users: list = _field("COURIER_ALLOWED_USERS", [],
                                 "Who may use the bot besides its admins and those let in with /allow: Telegram "
                                 "user ids and @usernames (comma separated; a username counts for the id it first "
                                 "comes with), or * for everyone; empty = nobody else (private)",
                                 item=user_ref)
    language: str = _field("COURIER_LANGUAGE", "en",
                           "Fallback language for replies (en, de, ru, zh, ja, tr); users get their /lang choice, "
                           "else their Telegram app's language when there is a catalog for it")
    database_url: Secret = _field("COURIER_DATABASE_URL", Secret(""),
                                  "PostgreSQL URL; empty = embedded server in the data directory")
    data_dir: str = _field("COURIER_DATA_DIR", "",
                           "Where Courier keeps its state; empty = <ComfyUI user dir>/courier")
    backends: list = _field("COURIER_BACKENDS", [],
                            "ComfyUI servers to run jobs on (http://host:port or http://<id>.anon); "
                            "empty = this ComfyUI on loopback")
    webhook_url: str = _field("COURIER_WEBHOOK_URL", "",
                              "Public URL Telegram should POST updates to (served at /courier/telegram/webhook); "
                              "empty = long polling")
    webhook_secret: Secret = _field("COURIER_WEBHOOK_SECRET", Secret(""),
                                    "Secret token Telegram sends with each webhook update (1-256 of A-Z a-z 0-9 _ -); "
                                    "an update without it is refused; empty = one generated and kept in PostgreSQL",
                                    pattern=(r"[A-Za-z0-9_-]{1,256}", "Telegram takes 1-256 characters of A-Z, a-z, "
                                                                      "0-9, _ and -"))
    miniapp_url: str = _field("COURIER_MINIAPP_URL", "",
                              "Where the Mini App form (the pack's miniapp/ folder, static) is served, for /app's "
                              "button: an https:// URL (Telegram takes no other; http:// only on loopback, for the "
                              "emulator), without a #fragment; this server serves it at /courier/miniapp/; "
                              "empty = no button",
                              pattern=(r"(https://[^\s#]+|http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?/[^\s#]*)",
                                       "an https:// URL without a #fragment (http:// only to 127.0.0.1, localhost "
                                       "or [::1])"))
    admin_token: Secret = _field("COURIER_ADMIN_TOKEN", Secret(""),
                                 "Token for the /courier admin routes (Authorization: Bearer <token>); "
                                 "empty = those routes refuse")
    allowed_hosts: list = _field("COURIER_ALLOWED_HOSTS", [],
                                 "Host names (besides localhost and IP addresses) under which ComfyUI may be "
                                 "reached, e.g. a LAN name (comma separated); other names get 403 (against DNS "
                                 "rebinding); .anon names pass when COURIER_ANYONE is on", item=host_name)
    admin_users: list = _field("COURIER_ADMIN_USERS", [],
                               "Telegram user ids who may use the admin commands (/queue, /cancel of any job, "
                               "/allow, /disallow, /ban, /unban, /stats, /bench, /compare; comma separated); empty = "
                               "none but the owner made with the code the console shows", item=int)
    progress_interval_s: float = _field("COURIER_PROGRESS_INTERVAL_S", 3.0,
                                        "Minimum seconds between progress edits in one chat", minimum=0.0)
    live_previews: bool = _field("COURIER_LIVE_PREVIEWS", True,
                                 "Show ComfyUI's latest sampler preview in a running job's status message "
                                 "(ComfyUI started with --preview-method auto)")
    upload_limit_mb: float = _field("COURIER_UPLOAD_LIMIT_MB", 50.0,
                                    "Largest file the Bot API server takes from the bot (Telegram's: 50; a local "
                                    "Bot API server's: 2000, the default in local mode); a bigger result is "
                                    "announced with its size",
                                    minimum=0.001)
    max_image_mb: float = _field("COURIER_MAX_IMAGE_MB", 20.0,
                                 "Largest image a user may send, checked before queueing (Telegram lets bots download "
                                 "at most 20 MB, whatever this says)", minimum=0.1)
    max_jobs_per_user: int = _field("COURIER_MAX_JOBS_PER_USER", 5,
                                    "Queued + running jobs one user may have at once", minimum=1)
    edit_command: str = _field("COURIER_EDIT_COMMAND", "qwen",
                               "The command the ✏️ button under a result runs with the user's instruction; where "
                               "its model files are missing on every backend, /img on the picture instead "
                               "(img2img with the default model)")
    quota_hour: int = _field("COURIER_QUOTA_HOUR", 0,
                             "Jobs one user may start per hour (admins: no limit); 0 = no limit", minimum=0)
    quota_day: int = _field("COURIER_QUOTA_DAY", 0,
                            "Jobs one user may start per 24 hours (admins: no limit); 0 = no limit", minimum=0)
    retention_days: int = _field("COURIER_RETENTION_DAYS", 30,
                                 "Finished jobs, their files on the backends and idle chat sessions are "
                                 "deleted after this many days; 0 = kept until /forget", minimum=0)
    job_timeout_s: float = _field("COURIER_JOB_TIMEOUT_S", 1800.0,
                                  "A job running longer than this on its backend is stopped (its prompt interrupted) "
                                  "and failed; sending its results counts apart (COURIER_DELIVERY_PATIENCE_S)",
                                  minimum=1.0)
    job_lease_s: float = _field("COURIER_JOB_LEASE_S", 60.0,
                                "Seconds a host's claim on a running job lasts unrenewed (renewed every 2 s, or every "
                                "third of it if shorter); a killed host's jobs go to another host after this",
                                minimum=3.0)
    delivery_patience_s: float = _field("COURIER_DELIVERY_PATIENCE_S", 900.0,
                                        "How long a job's results and its last status are tried again while "
                                        "Telegram fails them (an outage); then the job fails with Telegram's reason",
                                        minimum=1.0)
    delivery_backoff_max_s: float = _field("COURIER_DELIVERY_BACKOFF_MAX_S", 30.0,
                                           "The longest wait between two tries of a delivery through an outage "
                                           "(the waits double from 0.5 s; longer where Telegram asks)", minimum=0.5)
    receive_updates: bool = _field("COURIER_RECEIVE_UPDATES", True,
                                   "Take Telegram updates here (polling or webhook); off = only run jobs and send "
                                   "their results, beside a host on the same database that takes them")
    pipeline_depth: int = _field("COURIER_PIPELINE_DEPTH", 2,
                                 "Prompts kept on each backend at once, counting the running one, so the next "
                                 "job's upload and queueing overlap the current run; 1 = one at a time; a /bench "
                                 "session still has its backend alone",
                                 minimum=1)
    warm_wait_s: float = _field("COURIER_WARM_WAIT_S", 5.0,
                                "Warm placement: a backend takes first the jobs whose model files it holds (those of "
                                "the last job it ran, which ComfyUI keeps loaded), and a job waits up to this many "
                                "seconds after it was queued for the backend holding its model before another "
                                "takes it (and loads it); users still take turns; 0 = off, the fair order only",
                                minimum=0.0)
    anyone_enabled: bool = _field("COURIER_ANYONE", False,
                                  "Start anon and publish ComfyUI as a hidden service")
    anyone_agree_to_terms: bool = _field("COURIER_ANYONE_AGREE_TO_TERMS", False,
                                         "You accept the Anyone network terms (anon refuses to start otherwise)")
    anon_binary: str = _field("COURIER_ANON_BINARY", "",
                              "Path to the anon binary; empty = the one python <pack> install-anon installed")
    anyone_socks_url: str = _field("COURIER_ANYONE_SOCKS", "",
                                   "SOCKS5 proxy for .anon backends; empty = the anon we start")
    anyone_client_auth: bool = _field("COURIER_ANYONE_CLIENT_AUTH", True,
                                      "Only clients with an authorized key reach the hidden service; "
                                      "0 = anyone who learns the address (not recommended; logged as a warning "
                                      "at every start)")
    anyone_expose_ui: bool = _field("COURIER_ANYONE_EXPOSE_UI", False,
                                    "Pass every ComfyUI route through the hidden service (the editor, user "
                                    "data, other packs' routes); off = only what a Courier bot needs")
    private_mode: bool = _field("COURIER_PRIVATE_MODE", False,
                                "Bot-to-backend traffic may leave only through the Anyone SOCKS port")
    proxy_telegram: bool = _field("COURIER_PROXY_TELEGRAM", False,
                                  "Send the bot's Bot API traffic through the Anyone SOCKS port too")


def _coerce(key: str, raw: Any, field: dataclasses.Field) -> Any:
    default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
    kind = type(default)
    try:
        if kind is Secret:
            if not isinstance(raw, str):
                raise TypeError("expected a string")
            pattern, rule = field.metadata.get("pattern", (None, ""))
            if raw.strip() and pattern is not None and not re.fullmatch(pattern, raw.strip()):
                raise ValueError(rule)  # never the value: it is a secret
            return Secret(raw.strip())
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(f"expected true/false, got {raw!r}")
        if kind is list:
            items = raw if isinstance(raw, list) else [p for p in str(raw).split(",") if p.strip()]
            item_type = field.metadata.get("item", str)
            return [item_type(str(i).strip()) for i in items]
        if kind in (int, float):
            if isinstance(raw, bool) or (kind is int and isinstance(raw, float)):
                raise TypeError(f"expected {'a whole number' if kind is int else 'a number'}")
            value = kind(str(raw).strip()) if isinstance(raw, str) else kind(raw)
            minimum = field.metadata.get("minimum")
            if minimum is not None and value < minimum:
                raise ValueError(f"must be at least {minimum}")
            return value
        if not isinstance(raw, str):
            raise TypeError("expected a string")
        return raw.strip()
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"setting {key!r}: bad value ({exc})") from None


def load_settings(config_file: Path | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from ``config_file`` (if it exists) overridden by ``environ``."""
    environ = os.environ if environ is None else environ
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    values: dict[str, Any] = {}
    if config_file is not None and config_file.is_file():
        try:
            table = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{config_file.name}: not valid TOML ({exc})") from None
        for key, raw in table.items():
            if key not in fields:
                raise SettingsError(f"{config_file.name}: unknown setting {key!r}")
            values[key] = _coerce(key, raw, fields[key])
    for name, field in fields.items():
        env = field.metadata["env"]
        if env in environ:
            values[name] = _coerce(env, environ[env], field)
    if values.get("telegram_local_mode") and "upload_limit_mb" not in values:
        values["upload_limit_mb"] = LOCAL_UPLOAD_LIMIT_MB
    return Settings(**values)


def settings_table() -> list[tuple[str, str, str, str]]:
    """(env var, toml key, default as shown, help) of every setting, in the order of ``Settings``."""
    rows = []
    for f in dataclasses.fields(Settings):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if isinstance(default, bool):
            shown = "on" if default else "off"
        elif isinstance(default, (Secret, str, list)):
            shown = f"`{default}`" if isinstance(default, str) and default else ""
        else:
            shown = f"`{default:g}`" if isinstance(default, float) else f"`{default}`"
        rows.append((f.metadata["env"], f.name, shown, f.metadata["help"]))
    return rows


def configuration_markdown() -> str:
    """The table of docs/configuration.md (``python <pack> settings`` prints it; a test keeps the doc in step)."""
    lines = ["| environment | courier.toml | default | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{env}` | `{key}` | {shown} | {help_text} |" for env, key, shown, help_text in settings_table()]
    return "\n".join(lines) + "\n"
