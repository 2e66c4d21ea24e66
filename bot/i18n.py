"""User-facing text in one place, keyed by message id, per language.

The language is the user's Telegram language when we have it, else the
configured fallback, else English. Missing keys fall back to English.
"""

from __future__ import annotations

from ..jobs.errors import MESSAGES as BACKEND_MESSAGES

MESSAGES: dict[str, dict[str, str]] = {
    "en": {
        **BACKEND_MESSAGES,
        "welcome": "Hi {name}! I render images and videos with ComfyUI.\n\n{commands}",
        "help": "Commands:\n{commands}\n\nReply to a picture to edit it; without a reply, edit commands use your last result.",
        "help_line": "/{name} — {description}",
        "not_allowed": "Sorry, this bot is private. Ask its owner to add your Telegram id {user_id}.",
        "unknown_command": "I don't know /{name}. Send /help for the list of commands.",
        "missing_prompt": "Please add a description: /{name} <text>",
        "prompt_too_long": "That text is too long ({length} characters, the limit is {limit}).",
        "needs_image": "/{name} edits a picture: reply to one, send one with the command as caption, or make one first (e.g. with /demo).",
        "bad_image": "I couldn't use that picture: {reason}.",
        "too_many_jobs": "You already have {count} jobs waiting. Please wait for them or /cancel.",
        "queued": "Queued /{name} — position {position} in the queue.",
        "running": "Rendering /{name}…",
        "progress": "Rendering /{name}… {percent}% (step {value}/{max})",
        "done": "Done in {seconds:.1f} s.",
        "failed": "/{name} failed: {reason}",
        "cancelled": "Cancelled {count} job(s).",
        "nothing_to_cancel": "You have no jobs to cancel.",
        "status_none": "You have no jobs in the queue.",
        "status_line": "#{id} /{command} — {state}",
        "state_queued": "queued, position {position}",
        "state_running": "running",
        "internal_error": "something went wrong on our side; please try again",
        "timeout": "the job took longer than {seconds:.0f} s and was stopped",
        "admin_only": "/{name} is for the bot's admins only.",
        "bench_usage": "Usage: /bench <command> [runs] — runs from 1 to {max} (default {default}). Commands: {commands}",
        "bench_queued": "Benchmark of /{name} queued: {warmup} warm-up + {repeats} measured runs — position {position} in the queue.",
        "bench_warmup": "Benchmark /{name}: warm-up run {run} of {count}…",
        "bench_run": "Benchmark /{name}: run {run} of {count}…",
        "bench_report": "Benchmark /{name}: writing the report…",
        "bench_stored": "Stored as benchmark run #{id}; /compare shows it beside the other devices.",
        "bench_stored_elsewhere": "The backend stored this run in its own database (#{id}), not in the bot's: give it the bot's COURIER_DATABASE_URL to compare its runs here.",
        "compare_none": "No stored benchmark runs{suffix} yet: run /bench <command> on each device first.",
        "compare_one_side": "Every stored run{suffix} is from one device ({side}): run /bench on another one to compare.",
        "compare_for": " of {workflow}",
        "compare_stored": "Stored runs",
        "compare_reference": "Reference: the seed's published times (not measured here)",
        "compare_more": "Also stored: {sides}. GET /courier/benchmarks/compare?old=…&new=… compares any two.",
    },
    "de": {
        "welcome": "Hallo {name}! Ich erstelle Bilder und Videos mit ComfyUI.\n\n{commands}",
        "help": "Befehle:\n{commands}\n\nAntworte auf ein Bild, um es zu bearbeiten; ohne Antwort nehmen Bearbeitungsbefehle dein letztes Ergebnis.",
        "not_allowed": "Dieser Bot ist privat. Bitte den Betreiber, deine Telegram-ID {user_id} freizuschalten.",
        "unknown_command": "/{name} kenne ich nicht. /help zeigt alle Befehle.",
        "missing_prompt": "Bitte gib eine Beschreibung an: /{name} <Text>",
        "prompt_too_long": "Der Text ist zu lang ({length} Zeichen, erlaubt sind {limit}).",
        "needs_image": "/{name} bearbeitet ein Bild: antworte auf eines, schicke eines mit dem Befehl als Bildunterschrift oder erstelle zuerst eines (z. B. mit /demo).",
        "bad_image": "Dieses Bild kann ich nicht verwenden: {reason}.",
        "too_many_jobs": "Du hast schon {count} wartende Aufträge. Bitte warte oder nutze /cancel.",
        "queued": "/{name} eingereiht — Platz {position} in der Warteschlange.",
        "running": "/{name} wird berechnet…",
        "progress": "/{name} wird berechnet… {percent}% (Schritt {value}/{max})",
        "done": "Fertig in {seconds:.1f} s.",
        "failed": "/{name} ist fehlgeschlagen: {reason}",
        "cancelled": "{count} Auftrag/Aufträge abgebrochen.",
        "nothing_to_cancel": "Du hast keine Aufträge zum Abbrechen.",
        "status_none": "Du hast keine Aufträge in der Warteschlange.",
        "state_queued": "wartet, Platz {position}",
        "state_running": "läuft",
        "admin_only": "/{name} ist nur für die Admins des Bots.",
        "bench_usage": "Aufruf: /bench <Befehl> [Läufe] — 1 bis {max} Läufe (Standard {default}). Befehle: {commands}",
        "bench_queued": "Benchmark von /{name} eingereiht: {warmup} Aufwärm- + {repeats} gemessene Läufe — Platz {position} in der Warteschlange.",
        "bench_warmup": "Benchmark /{name}: Aufwärmlauf {run} von {count}…",
        "bench_run": "Benchmark /{name}: Lauf {run} von {count}…",
        "bench_report": "Benchmark /{name}: Bericht wird erstellt…",
        "bench_stored": "Gespeichert als Benchmark-Lauf #{id}; /compare zeigt ihn neben den anderen Geräten.",
        "bench_stored_elsewhere": "Das Backend hat diesen Lauf in seiner eigenen Datenbank gespeichert (#{id}), nicht in der des Bots: gib ihm die COURIER_DATABASE_URL des Bots, um seine Läufe hier zu vergleichen.",
        "compare_none": "Noch keine gespeicherten Benchmark-Läufe{suffix}: starte zuerst /bench <Befehl> auf jedem Gerät.",
        "compare_one_side": "Alle gespeicherten Läufe{suffix} stammen von einem Gerät ({side}): starte /bench auf einem anderen, um zu vergleichen.",
        "compare_for": " von {workflow}",
        "compare_stored": "Gespeicherte Läufe",
        "compare_reference": "Referenz: die veröffentlichten Zeiten des Seeds (nicht hier gemessen)",
        "compare_more": "Außerdem gespeichert: {sides}. GET /courier/benchmarks/compare?old=…&new=… vergleicht zwei beliebige.",
    },
    "ru": {
        "welcome": "Привет, {name}! Я создаю изображения и видео с помощью ComfyUI.\n\n{commands}",
        "help": "Команды:\n{commands}\n\nОтветьте на картинку, чтобы изменить её; без ответа команды правки берут ваш последний результат.",
        "not_allowed": "Извините, это закрытый бот. Попросите владельца добавить ваш Telegram id {user_id}.",
        "unknown_command": "Я не знаю команду /{name}. Список команд: /help",
        "missing_prompt": "Добавьте описание: /{name} <текст>",
        "prompt_too_long": "Текст слишком длинный ({length} символов, максимум {limit}).",
        "needs_image": "/{name} изменяет картинку: ответьте на неё, пришлите её с командой в подписи или сначала создайте (например, /demo).",
        "bad_image": "Не получилось использовать эту картинку: {reason}.",
        "too_many_jobs": "У вас уже {count} задач в очереди. Подождите или используйте /cancel.",
        "queued": "/{name} в очереди — позиция {position}.",
        "running": "/{name} рисуется…",
        "progress": "/{name} рисуется… {percent}% (шаг {value}/{max})",
        "done": "Готово за {seconds:.1f} с.",
        "failed": "/{name} не удалось: {reason}",
        "cancelled": "Отменено задач: {count}.",
        "nothing_to_cancel": "У вас нет задач для отмены.",
        "status_none": "У вас нет задач в очереди.",
        "state_queued": "в очереди, позиция {position}",
        "state_running": "выполняется",
        "admin_only": "/{name} доступна только администраторам бота.",
        "bench_usage": "Использование: /bench <команда> [запуски] — от 1 до {max} запусков (по умолчанию {default}). Команды: {commands}",
        "bench_queued": "Бенчмарк /{name} в очереди: {warmup} разогревочных + {repeats} измеряемых запусков — позиция {position}.",
        "bench_warmup": "Бенчмарк /{name}: разогревочный запуск {run} из {count}…",
        "bench_run": "Бенчмарк /{name}: запуск {run} из {count}…",
        "bench_report": "Бенчмарк /{name}: готовлю отчёт…",
        "bench_stored": "Сохранено как прогон бенчмарка #{id}; /compare покажет его рядом с другими устройствами.",
        "bench_stored_elsewhere": "Бэкенд сохранил этот прогон в своей собственной базе (#{id}), а не в базе бота: укажите ему COURIER_DATABASE_URL бота, чтобы сравнивать его прогоны здесь.",
        "compare_none": "Сохранённых прогонов бенчмарка{suffix} пока нет: сначала запустите /bench <команда> на каждом устройстве.",
        "compare_one_side": "Все сохранённые прогоны{suffix} сделаны на одном устройстве ({side}): запустите /bench на другом, чтобы сравнить.",
        "compare_for": " для {workflow}",
        "compare_stored": "Сохранённые прогоны",
        "compare_reference": "Эталон: опубликованные времена из исходного сравнения (измерены не здесь)",
        "compare_more": "Также сохранены: {sides}. GET /courier/benchmarks/compare?old=…&new=… сравнит любые два.",
    },
}


def pick_language(user_language: str | None, fallback: str) -> str:
    for candidate in ((user_language or "").split("-")[0].lower(), fallback):
        if candidate in MESSAGES:
            return candidate
    return "en"


def catalog(language: str) -> dict[str, str]:
    """Every message in ``language``, English where a translation is missing."""
    return {**MESSAGES["en"], **MESSAGES.get(language, {})}


def text(language: str, key: str, **params) -> str:
    return catalog(language)[key].format(**params)
