"""The base every package stands on: settings, health, logging, message catalogs, images, version.

Nothing here imports another package of the pack (the layering test holds it to that).
"""
