"""Courier's HTTP routes, all under /courier/: one RouteTableDef per module."""

from . import anyone, health, telegram_webhook

ROUTE_TABLES = (health.routes, anyone.routes, telegram_webhook.routes)
