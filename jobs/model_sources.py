"""Where the shipped commands' model files come from: each model's ``url`` in workflows/api/commands.json.

Read once; the missing-model reply (``errors``) and the readiness of commands (``readiness``) name
the download of a file by its name, whichever command's graph asks for it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from .seed import seed_manifest


@functools.cache
def model_urls() -> Mapping[str, str]:
    """``{file name: download URL}`` of every model the shipped commands need."""
    return {model["name"]: model["url"] for entry in seed_manifest().values()
            for model in entry.get("models", ()) if model.get("url")}


def model_url(name: str) -> str | None:
    """The download URL of the model file ``name``; None if no shipped command names it."""
    return model_urls().get(name)
