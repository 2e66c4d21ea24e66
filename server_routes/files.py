"""POST /courier/files/delete: a bot deletes the files Courier's jobs left on this backend.

``/forget`` and the retention purge send ``{"files": [{filename, subfolder, type}], "prompt_ids": [...]}``.
Only files in the ``courier`` subfolder (or below) of ComfyUI's input, output and temp folders
can go: those of the shipped workflows and of uploaded job inputs, never anything else on the
machine. The prompts' entries leave ComfyUI's history (they hold the users' prompts). The
reply counts ``deleted``, ``missing`` (already gone), ``refused`` (outside Courier's folders) and
``failed`` (the file system said no).
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from ..core.logs import get_logger
from .access import BACKEND, Routes
from .api import ApiError, Field, check_body, json_response, read_json

log = get_logger("routes")

routes = Routes()

COURIER_SUBFOLDER = "courier"
FOLDER_TYPES = ("input", "output", "temp")
MAX_ITEMS = 10_000


def courier_file(root: Path, subfolder: object, filename: object) -> Path | None:
    """The file ``root/subfolder/filename`` if it lies in ``root/courier`` (or below); None otherwise."""
    if not isinstance(subfolder, str) or not isinstance(filename, str) or not filename:
        return None
    base = (root / COURIER_SUBFOLDER).resolve()
    path = (root / subfolder / filename).resolve()
    return path if path.is_relative_to(base) and path != base else None


@routes.post("/courier/files/delete", access=BACKEND)
async def delete_files(request: web.Request) -> web.Response:
    body = check_body(await read_json(request), {"files": Field(list, required=True, max_length=MAX_ITEMS),
                                                 "prompt_ids": Field(list, max_length=MAX_ITEMS)})
    try:
        import folder_paths  # ComfyUI's
    except ImportError:
        raise ApiError(503, "no_comfyui", "this Courier does not run inside ComfyUI: it keeps no files") from None
    counts = {"deleted": 0, "missing": 0, "refused": 0, "failed": 0}
    for listed in body["files"]:
        item = listed if isinstance(listed, dict) else {}
        root = folder_paths.get_directory_by_type(item.get("type")) if item.get("type") in FOLDER_TYPES else None
        path = courier_file(Path(root), item.get("subfolder"), item.get("filename")) if root else None
        if path is None:
            counts["refused"] += 1
            continue
        try:
            path.unlink()
            counts["deleted"] += 1
        except FileNotFoundError:
            counts["missing"] += 1
        except OSError as exc:
            log.warning("could not delete %s: %s", path, exc)
            counts["failed"] += 1
    forget_history([p for p in body.get("prompt_ids", []) if isinstance(p, str)])
    return json_response(counts)


def forget_history(prompt_ids: list[str]) -> None:
    """Drop these prompts from ComfyUI's history (when ComfyUI's server runs here)."""
    try:
        from server import PromptServer
    except ImportError:
        return
    server = getattr(PromptServer, "instance", None)
    for prompt_id in prompt_ids if server is not None else []:
        server.prompt_queue.delete_history_item(prompt_id)
