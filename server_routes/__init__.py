"""Courier's HTTP routes, all under /courier/: one RouteTableDef per module.

Each route declares its access in its table (``access.Routes``: admin token, read-only from this
machine, backend, public, the webhook's secret), and the router gets the route's guarded handler only.
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
