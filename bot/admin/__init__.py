"""Admin commands, one module per area: ``/bench`` and ``/compare`` (``bench``), ``/allow``,
``/disallow``, ``/ban`` and ``/unban`` (``users``), ``/queue`` (``queue``), ``/stats`` (``stats``)
and ``/backends`` (``backends``); ``/cancel <job id>`` of anyone's job is ``bot/cancelling.py``'s.

Only admins (``COURIER_ADMIN_USERS``, and the owner made with the console's code) may run them;
everyone else gets a refusal in their language (``gate.admin_only``), and only admins see them in
their Telegram menu (``admin_menu``, published for each admin's chat). ``/bench`` queues a job of
kind ``benchmark`` (``jobs/queueing.py``; ``jobs/bench.py`` runs it on the backend that claims
it); ``/backends`` lists the backends table and drains or undrains one; the others answer from
PostgreSQL at once.
"""

from __future__ import annotations

from ...core import i18n
from .backends import backends
from .bench import bench, compare
from .queue import queue
from .stats import stats
from .users import allow, ban, disallow, unban

ADMIN_HANDLERS = {"queue": queue, "allow": allow, "disallow": disallow, "ban": ban, "unban": unban, "stats": stats,
                  "bench": bench, "compare": compare, "backends": backends}


def admin_menu(language: str) -> list[tuple[str, str]]:
    """(command, description) that admins see in their menu after everyone's."""
    def say(key: str) -> str:
        return i18n.text(language, key)

    return [("queue", say("menu_queue")), ("allow", say("menu_allow")), ("disallow", say("menu_disallow")),
            ("ban", say("menu_ban")), ("unban", say("menu_unban")),
            ("stats", say("menu_stats")), ("bench", say("menu_bench")), ("compare", say("menu_compare")),
            ("backends", say("menu_backends"))]
