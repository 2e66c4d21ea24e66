"""/courier/commands: the bot's command table -- list, publish a graph, enable/disable, delete, export.

| method | path | access | body |
| --- | --- | --- | --- |
| GET | /courier/commands | status | |
| POST | /courier/commands | admin | ``{workflow, name?, description?, owner?, replace?, confirm_missing?}``; a |
| | | | graph without Telegram nodes with ``auto: true`` (``prompt?``, ``image?``, ``outputs?``, ``dry_run?``) |
| PATCH | /courier/commands/{name} | admin | ``{enabled}`` |
| DELETE | /courier/commands/{name} | admin | |
| GET | /courier/commands/{name}/export | status | |

Every change refreshes the bot's command menu (setMyCommands) at once.

A publish runs ComfyUI's own validation of the graph (400 ``comfyui_refused`` with its reasons) and
answers with ``models``: per backend, whether it has every model file the graph names and which it
lacks. Where no backend has them all, it stores nothing and answers 409 ``models_missing`` with the
same ``models``, unless the body says ``confirm_missing: true`` (the editor asks first).
"""

from __future__ import annotations

from collections.abc import Collection

from aiohttp import web

from ..core import i18n
from ..jobs import autopublish
from ..jobs.errors import Problem, render_problems
from ..jobs.workflow import WorkflowError
from ..runtime import COURIER, Courier
from ..store import commands
from . import publish
from .access import ADMIN, STATUS, Routes
from .api import ApiError, Field, check_body, json_response, read_json, store_of
from .readiness import backend_offers

routes = Routes()

NODE_TYPES = web.AppKey("courier_node_types", Collection[str])
"""Node types a published graph may use; absent = those of the ComfyUI we run in."""

PUBLISH_BODY = {
    "workflow": Field(dict, required=True),
    "name": Field(str, max_length=64),
    "description": Field(str, max_length=256),
    "owner": Field(str, max_length=64),
    "replace": Field(bool),
    "auto": Field(bool),  # a graph without Telegram nodes: the pack finds where they go (jobs/autopublish.py)
    "prompt": Field(str),  # with auto: these override what it finds
    "image": Field((str, type(None))),  # null: no picture from the user
    "outputs": Field(list),
    "dry_run": Field(bool),  # with auto: only say what it finds, store nothing
    "confirm_missing": Field(bool),  # publish though no backend has every model file the graph names
}
AUTO_CHOICES = ("prompt", "image", "outputs")
PATCH_BODY = {"enabled": Field(bool, required=True)}


@routes.get("/courier/commands", access=STATUS)
async def list_commands(request: web.Request) -> web.Response:
    listed = await commands.list_commands(store_of(request.app[COURIER]).pool)
    return json_response({"commands": [publish.summary(c) for c in listed]})


@routes.post("/courier/commands", access=ADMIN)
async def publish_command(request: web.Request) -> web.Response:
    courier = request.app[COURIER]
    body = check_body(await read_json(request), PUBLISH_BODY)
    auto = _auto_choices(body)
    try:
        if body.get("dry_run", False):
            found = publish.found_in(body["workflow"], _node_types(request.app), auto)
            return json_response({"found": autopublish.summary(body["workflow"], found)})
        pool = store_of(courier).pool
        published = await publish.publish(
            pool, body["workflow"], _node_types(request.app), name=body.get("name"),
            description=body.get("description", ""), owner=body.get("owner", "editor"),
            replace=body.get("replace", False), auto=auto, offers=await backend_offers(pool, courier.backends()),
            confirm_missing=body.get("confirm_missing", False))
    except autopublish.Unusable as exc:
        raise ApiError(400, exc.code, str(exc)) from None
    except publish.FileRefused as exc:
        raise ApiError(400, exc.problem.key, exc.problem.render(i18n.catalog(courier.settings.language))) from None
    except publish.ComfyRefused as exc:
        messages = i18n.catalog(courier.settings.language)
        raise ApiError(400, "comfyui_refused", Problem("publish_comfyui_refused", {
            "problems": render_problems(exc.problems, messages)}).render(messages)) from None
    except WorkflowError as exc:
        raise ApiError(400, "bad_workflow", str(exc)) from None
    except publish.ReservedName as exc:
        raise ApiError(409, "reserved_name", str(exc)) from None
    except ValueError as exc:
        raise ApiError(400, "bad_name", str(exc)) from None
    except publish.NameTaken as exc:
        raise ApiError(409, "command_exists", str(exc)) from None
    except publish.ModelsMissing as exc:
        message = Problem("publish_models_missing", {"files": _missing_files(exc.models)}).render(
            i18n.catalog(courier.settings.language))
        return json_response({"error": {"code": "models_missing", "message": message}, "models": exc.models},
                             status=409)
    reply = {"command": publish.summary(published.command), "menu_updated": await _refresh_menu(courier),
             "models": published.models}
    if published.found is not None:
        reply["found"] = published.found
    return json_response(reply, status=201 if published.created else 200)


@routes.patch("/courier/commands/{name:[^/]+}", access=ADMIN)
async def set_enabled(request: web.Request) -> web.Response:
    courier = request.app[COURIER]
    name = _name(request)
    body = check_body(await read_json(request), PATCH_BODY)
    command = await commands.set_command_enabled(store_of(courier).pool, name, body["enabled"])
    if command is None:
        raise _not_found(name)
    return json_response({"command": publish.summary(command), "menu_updated": await _refresh_menu(courier)})


@routes.delete("/courier/commands/{name:[^/]+}", access=ADMIN)
async def delete_command(request: web.Request) -> web.Response:
    courier = request.app[COURIER]
    name = _name(request)
    pool = store_of(courier).pool
    command = await commands.get_command(pool, name)
    if command is None:
        raise _not_found(name)
    if command.source == "seed":
        raise ApiError(409, "shipped_command", f"/{name} ships with Courier and comes back when it starts; "
                                               "disable it instead (PATCH {\"enabled\": false})")
    await commands.delete_command(pool, name)
    return json_response({"deleted": name, "menu_updated": await _refresh_menu(courier)})


@routes.get("/courier/commands/{name:[^/]+}/export", access=STATUS)
async def export_command(request: web.Request) -> web.Response:
    name = _name(request)
    command = await commands.get_command(store_of(request.app[COURIER]).pool, name)
    if command is None:
        raise _not_found(name)
    return json_response(command.workflow,
                         headers={"Content-Disposition": f'attachment; filename="{name}.json"'})


def _auto_choices(body: dict) -> dict | None:
    """The choices for ``autopublish.analyze`` when the body asks for ``auto``; None without it."""
    given = [name for name in (*AUTO_CHOICES, "dry_run") if name in body]
    if not body.get("auto", False):
        if given:
            raise ApiError(400, "bad_body", f"{', '.join(map(repr, given))} only go with \"auto\": true")
        return None
    return {name: body[name] for name in AUTO_CHOICES if name in body}


def _missing_files(models: list[dict]) -> str:
    """Each backend that lacks model files, with their names and folders: "url: a (checkpoints); …"."""
    return "; ".join(f"{backend['url']}: " + ", ".join(f"{file['name']} ({file['folder']})"
                                                      for file in backend["missing"])
                     for backend in models if backend["missing"])


def _name(request: web.Request) -> str:
    try:
        return commands.check_name(request.match_info["name"])
    except ValueError as exc:
        raise ApiError(400, "bad_name", str(exc)) from None


def _not_found(name: str) -> ApiError:
    return ApiError(404, "no_such_command", f"there is no command /{name}")


def _node_types(app: web.Application) -> Collection[str]:
    if NODE_TYPES in app:
        return app[NODE_TYPES]
    node_types = publish.comfyui_node_types()
    if node_types is None:
        raise ApiError(503, "no_node_list", "not running inside ComfyUI: its node list is unknown")
    return node_types


async def _refresh_menu(courier: Courier) -> bool:
    """Update the bot's command menu; False when the bot is not running."""
    if courier.bot is None:
        return False
    await courier.bot.publish_command_menu()
    return True
