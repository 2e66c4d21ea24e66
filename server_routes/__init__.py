"""Courier's HTTP routes, all under /courier/: one RouteTableDef per module."""

from . import health

ROUTE_TABLES = (health.routes,)
