"""Command-line tools behind ``python <pack> …``: ``try`` (a local bot to try), ``tiny-models``
(seeded random-weight models for tests and ``try``), ``catalogs`` (message catalog checks)."""
