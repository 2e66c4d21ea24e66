"""Courier's HTTP routes, all under /courier/: one RouteTableDef per module.

Access is decided per route by ``api.endpoint`` (admin token, read-only from this machine, the
webhook's secret; health tells strangers the states only); anyone stays public as before.
"""

from . import (
    anyone,
    backends,
    benchmarks,
    commands,
    compare,
    files,
    health,
    jobs,
    miniapp,
    readiness,
    sessions,
    telegram_webhook,
)

# compare before benchmarks: /courier/benchmarks/compare must win over any /courier/benchmarks/{id}
ROUTE_TABLES = (health.routes, anyone.routes, telegram_webhook.routes, commands.routes, jobs.routes,
                sessions.routes, backends.routes, readiness.routes, compare.routes, benchmarks.routes, files.routes,
                miniapp.routes)
