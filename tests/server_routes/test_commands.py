"""/courier/commands against real PostgreSQL: publish, list, enable/disable, delete, export, hostile input."""

import json
import sys
import types

import pytest
from yarl import URL

from comfyui_courier.core import i18n
from comfyui_courier.jobs.options import command_options, offered
from comfyui_courier.jobs.seed import seed_commands
from comfyui_courier.server_routes.api import MAX_BODY_BYTES
from comfyui_courier.store import commands
from comfyui_courier.tests.server_routes.helpers import NODE_TYPES, demo_graph


async def publish(api, **body):
    return await api.send("POST", "/courier/commands", json={"workflow": demo_graph(), **body})


async def test_publish_stores_the_graph_as_a_command(api, store):
    status, reply, _ = await publish(api, name="mycmd", description="Cards from text")
    assert status == 201, reply
    assert reply["command"] | {"created_at": None, "updated_at": None} == {
        "name": "mycmd", "description": "Cards from text", "owner": "editor", "enabled": True,
        "source": "published", "requires_image": False, "nodes": 3, "created_at": None, "updated_at": None,
        "options": [{"name": "seed"}, {"name": "ar"}, {"name": "size", "low": 256, "high": 2048},
                    {"name": "n", "low": 1, "high": 4}]}
    assert reply["menu_updated"] is False  # no bot in this test
    stored = await commands.get_command(store.pool, "mycmd")
    assert stored.workflow["3"]["class_type"] == "CourierTelegramOutput"
    status, listed, _ = await api.get("/courier/commands")
    assert [c["name"] for c in listed["commands"]] == ["mycmd"]


async def test_the_list_shows_each_shipped_command_s_options_as_its_workflow_declares_them(api, store):
    await seed_commands(store)
    status, listed, _ = await api.get("/courier/commands")
    by_name = {c["name"]: c["options"] for c in listed["commands"]}
    assert by_name["f"] == [{"name": "seed"}, {"name": "ar"}, {"name": "size", "low": 256, "high": 2048},
                            {"name": "steps", "low": 1, "high": 8}, {"name": "n", "low": 1, "high": 4}]
    assert by_name["demoedit"] == [{"name": "seed"}]
    for command in await commands.list_commands(store.pool):
        assert [o["name"] for o in by_name[command.name]] == offered(command_options(command.workflow))


async def test_the_name_comes_from_the_telegram_input_when_not_given(api):
    status, reply, _ = await api.send("POST", "/courier/commands", json={"workflow": demo_graph("fromnode")})
    assert (status, reply["command"]["name"]) == (201, "fromnode")


async def test_the_stored_graph_names_its_command_and_forgets_editor_only_inputs(api):
    graph = demo_graph("other", send_to_chat="123456")
    status, _, _ = await api.send("POST", "/courier/commands", json={"workflow": graph, "name": "/mycmd"})
    assert status == 201
    status, exported, headers = await api.get("/courier/commands/mycmd/export")
    assert status == 200
    assert headers["Content-Disposition"] == 'attachment; filename="mycmd.json"'
    assert exported["1"]["inputs"]["command"] == "mycmd"
    assert exported["3"]["inputs"]["send_to_chat"] == ""  # bot jobs must not also go to the editor's chat
    assert graph["3"]["inputs"]["send_to_chat"] == "123456"  # the caller's graph is not touched
    assert {k: v for k, v in exported.items() if k != "1" and k != "3"} == {"2": graph["2"]}


async def test_publishing_over_a_command_needs_replace(api, store):
    await seed_commands(store)
    for name in ("demo", "mycmd"):
        if name == "mycmd":
            assert (await publish(api, name=name))[0] == 201
        status, reply, _ = await publish(api, name=name)
        assert (status, reply["error"]["code"]) == (409, "command_exists"), reply
        assert "replace" in reply["error"]["message"]
        status, reply, _ = await publish(api, name=name, replace=True, description="mine now")
        assert status == 200, reply
        assert (reply["command"]["source"], reply["command"]["description"]) == ("published", "mine now")


async def test_enable_disable_and_delete(api, store):
    await seed_commands(store)
    await publish(api, name="mycmd")
    status, reply, _ = await api.send("PATCH", "/courier/commands/mycmd", json={"enabled": False})
    assert (status, reply["command"]["enabled"]) == (200, False)
    assert not (await commands.get_command(store.pool, "mycmd")).enabled
    status, reply, _ = await api.send("PATCH", "/courier/commands/mycmd", json={"enabled": True})
    assert (status, reply["command"]["enabled"]) == (200, True)
    status, reply, _ = await api.send("DELETE", "/courier/commands/mycmd")
    assert (status, reply["deleted"]) == (200, "mycmd")
    assert await commands.get_command(store.pool, "mycmd") is None
    for method, path, body in (("DELETE", "/courier/commands/mycmd", None),
                               ("PATCH", "/courier/commands/mycmd", {"enabled": True}),
                               ("GET", "/courier/commands/mycmd/export", None)):
        status, reply, _ = await api.send(method, path, json=body)
        assert (status, reply["error"]["code"]) == (404, "no_such_command")


async def test_shipped_commands_are_disabled_not_deleted(api, store):
    await seed_commands(store)
    status, reply, _ = await api.send("DELETE", "/courier/commands/demo")
    assert (status, reply["error"]["code"]) == (409, "shipped_command")
    assert "disable" in reply["error"]["message"]
    assert await commands.get_command(store.pool, "demo") is not None


@pytest.mark.parametrize("name", ["../x", "..", "MyCmd", "кот", "émoji", "a" * 33, "", "my cmd", "my-cmd",
                                  "x;drop table", "/", "mycmd\n", "my\x00cmd"])
async def test_bad_names_are_refused(api, store, name):
    status, reply, _ = await publish(api, name=name)
    code = "bad_text" if "\x00" in name else "bad_name"  # a NUL is refused in any text of the body
    assert (status, reply["error"]["code"]) == (400, code), reply
    assert await commands.list_commands(store.pool) == []


@pytest.mark.parametrize("text", ["\x00", "a\x00b", "\ud800", "a\udfffb"])
async def test_text_postgresql_cannot_store_is_refused_anywhere_in_the_body(api, store, text):
    graph = demo_graph()
    graph["1"]["inputs"]["prompt"] = text
    for body in ({"workflow": graph}, {"description": text}, {"workflow": {**demo_graph(), text: {}}}):
        status, reply, _ = await publish(api, **body)
        assert (status, reply["error"]["code"]) == (400, "bad_text"), reply
    assert await commands.list_commands(store.pool) == []
    status, reply, _ = await publish(api, description="\U0001f600 a pair of surrogates is one character")
    assert status == 201, reply


async def test_a_name_with_braces_is_a_bad_name_not_a_missing_route(api):
    for method in ("PATCH", "DELETE"):
        status, reply, _ = await api.send(method, "/courier/commands/%7Bx%7D", json={"enabled": False})
        assert (status, reply["error"]["code"]) == (400, "bad_name"), reply
    status, reply, _ = await api.get("/courier/commands/%7Bx%7D/export")
    assert (status, reply["error"]["code"]) == (400, "bad_name"), reply


@pytest.mark.parametrize("name", ["help", "start", "status", "cancel"])
async def test_builtin_command_names_are_reserved(api, name):
    status, reply, _ = await publish(api, name=name)
    assert (status, reply["error"]["code"]) == (409, "reserved_name")


@pytest.mark.parametrize("path", ["/courier/commands/..%2Fx", "/courier/commands/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
                                  "/courier/commands/MyCmd", "/courier/commands/%D0%BA%D0%BE%D1%82",
                                  "/courier/commands/..%2Fx/export", "/courier/commands/a%00b/export"])
async def test_bad_names_in_paths_are_400(api, path):
    for method, body in (("PATCH", {"enabled": False}), ("DELETE", None), ("GET", None)):
        if (method == "GET") != path.endswith("/export"):
            continue
        status, reply, _ = await api.send(method, URL(api.url + path, encoded=True), json=body)
        assert (status, reply["error"]["code"]) == (400, "bad_name"), (method, path, reply)


def _without(graph, node_id):
    return {k: v for k, v in graph.items() if k != node_id}


@pytest.mark.parametrize("workflow,says", [
    ({}, "non-empty object"),
    ([1, 2], "must be an object"),
    ({"1": "x"}, "no class_type"),
    ({"1": {"inputs": {}}}, "no class_type"),
    ({"1": {"class_type": 5}}, "no class_type"),
    ({"1": {"class_type": "CourierTelegramInput", "inputs": []}}, "inputs must be an object"),
    ({**demo_graph(), "9": {"class_type": "EvilNode", "inputs": {}}}, "not installed on this ComfyUI: EvilNode"),
    ({**demo_graph(), "9": {"class_type": "../../etc/passwd", "inputs": {}}}, "not installed"),
    (_without(demo_graph(), "1") | {"2": {"class_type": "ImageSharpen", "inputs": {}}}, "exactly one Telegram Input"),
    ({**demo_graph(), "4": demo_graph()["1"]}, "exactly one Telegram Input node, this workflow has 2"),
    ({**demo_graph(), "1": {**demo_graph()["1"], "inputs": {**demo_graph()["1"]["inputs"], "options": "steps=9-1"}}},
     "options: steps must lie within 1-10000, low before high"),
    ({**demo_graph(), "1": {**demo_graph()["1"], "inputs": {**demo_graph()["1"]["inputs"], "options": 4}}},
     "options must be a text"),
    (_without(demo_graph(), "3"), "at least one Telegram Output"),
    ({**demo_graph(), "4": {"class_type": "SaveImage", "inputs": {"images": ["77", 0]}}}, "missing node '77'"),
    ({"nodes": [{"id": 1, "type": "CourierTelegramInput"}], "links": []}, "API format"),
    ({str(i): {"class_type": "ImageInvert", "inputs": {}} for i in range(2001)}, "at most 2000"),
])
async def test_graphs_that_cannot_be_commands_are_400(api, store, workflow, says):
    status, reply, _ = await api.send("POST", "/courier/commands", json={"workflow": workflow, "name": "x"})
    assert status == 400, reply
    assert reply["error"]["code"] in ("bad_workflow", "bad_body")
    assert says in reply["error"]["message"]
    assert await commands.list_commands(store.pool) == []


@pytest.mark.parametrize("body,says", [
    ({"name": "x"}, "'workflow' is required"),
    ({"workflow": demo_graph(), "name": 5}, "'name' must be a string"),
    ({"workflow": demo_graph(), "name": None}, "'name' must be a string"),
    ({"workflow": demo_graph(), "replace": "yes"}, "'replace' must be true or false"),
    ({"workflow": demo_graph(), "replace": 1}, "'replace' must be true or false"),
    ({"workflow": "{}"}, "'workflow' must be an object"),
    ({"workflow": demo_graph(), "description": "x" * 257}, "'description' is longer than 256"),
    ({"workflow": demo_graph(), "owner": ["me"]}, "'owner' must be a string"),
    ({"workflow": demo_graph(), "admin": True}, "unknown member(s): 'admin'"),
    ([{"workflow": demo_graph()}], "must be a JSON object"),
    ("mycmd", "must be a JSON object"),
    (None, "must be a JSON object"),
])
async def test_publish_bodies_of_the_wrong_shape_are_400(api, body, says):
    status, reply, _ = await api.send("POST", "/courier/commands", data=json.dumps(body),
                                      headers={"Content-Type": "application/json"})
    assert (status, reply["error"]["code"]) == (400, "bad_body"), reply
    assert says in reply["error"]["message"]


@pytest.mark.parametrize("body", [{}, {"enabled": "false"}, {"enabled": 0}, {"enabled": None},
                                  {"enabled": True, "name": "x"}, [True]])
async def test_patch_bodies_of_the_wrong_shape_are_400(api, store, body):
    await seed_commands(store)
    status, reply, _ = await api.send("PATCH", "/courier/commands/demo", json=body)
    assert (status, reply["error"]["code"]) == (400, "bad_body"), reply
    assert (await commands.get_command(store.pool, "demo")).enabled


@pytest.mark.parametrize("data,status,code", [
    (b"{not json", 400, "bad_json"),
    (b'{"workflow": NaN}', 400, "bad_json"),
    (b'{"workflow": Infinity}', 400, "bad_json"),
    (b"\xff\xfe{}", 400, "bad_json"),
    (b"[" * 200_000 + b"]" * 200_000, 400, "bad_json"),  # nesting beyond the parser's recursion limit
    (b"", 400, "bad_json"),
])
async def test_bodies_that_are_not_json_are_refused(api, data, status, code):
    reply_status, reply, _ = await api.send("POST", "/courier/commands", data=data,
                                            headers={"Content-Type": "application/json"})
    assert (reply_status, reply["error"]["code"]) == (status, code)


async def test_bodies_must_say_they_are_json(api):
    status, reply, _ = await api.send("POST", "/courier/commands", data=json.dumps({"workflow": demo_graph()}),
                                      headers={"Content-Type": "text/plain"})
    assert (status, reply["error"]["code"]) == (415, "unsupported_media_type")
    status, reply, _ = await api.send("POST", "/courier/commands", data={"workflow": "x"})  # a form post
    assert status == 415


async def test_huge_bodies_are_413_declared_or_streamed(api, store):
    huge = {"workflow": {**demo_graph(), "4": {"class_type": "ImageInvert",
                                               "inputs": {"pad": "x" * MAX_BODY_BYTES}}}}
    status, reply, _ = await api.send("POST", "/courier/commands", json=huge)
    assert (status, reply["error"]["code"]) == (413, "too_large")

    async def chunks():  # no Content-Length: the limit holds while reading
        yield b'{"workflow": {"pad": "'
        for _ in range(40):
            yield b"y" * 65536
        yield b'"}}'

    status, reply, _ = await api.send("POST", "/courier/commands", data=chunks(),
                                      headers={"Content-Type": "application/json"})
    assert (status, reply["error"]["code"]) == (413, "too_large")
    assert await commands.list_commands(store.pool) == []


async def test_publish_on_comfyui_checks_its_node_list(courier_api, store):
    """Without a given list the route asks ComfyUI's ``nodes`` module; outside ComfyUI it says so."""
    api = await courier_api(store=store, node_types=None)
    status, reply, _ = await publish(api, name="mycmd")
    assert (status, reply["error"]["code"]) == (503, "no_node_list")


async def test_publish_inside_comfyui_checks_the_loaded_nodes(courier_api, store, monkeypatch):
    comfy_nodes = types.ModuleType("nodes")
    comfy_nodes.NODE_CLASS_MAPPINGS = {name: object for name in ("CourierTelegramInput", "CourierTelegramOutput")}
    monkeypatch.setitem(sys.modules, "nodes", comfy_nodes)
    api = await courier_api(store=store, node_types=None)
    status, reply, _ = await publish(api, name="mycmd")
    assert (status, reply["error"]["message"]) == (400, "node types not installed on this ComfyUI: ImageSharpen")
    comfy_nodes.NODE_CLASS_MAPPINGS["ImageSharpen"] = object
    status, _, _ = await publish(api, name="mycmd")
    assert status == 201


@pytest.mark.parametrize("node,name,value", [
    ("1", "image", "/etc/hostname"), ("1", "image", "../private.png"), ("1", "image", "render.png [output]"),
    ("1", "image", "example.png"), ("10", "image", "/srv/private.png"), ("10", "image", "photo.png"),
    ("3", "filename_prefix", "../elsewhere"),
])
async def test_a_graph_naming_a_file_outside_courier_s_folders_is_refused_and_not_stored(
        courier_api, store, node, name, value):
    """Issue 27 item 1: every user who ran such a command would be sent that server file."""
    api = await courier_api({"COURIER_LANGUAGE": "de"}, store=store, node_types=NODE_TYPES | {"LoadImage"})
    graph = demo_graph()
    graph["10"] = {"class_type": "LoadImage", "inputs": {"image": "courier/job-1.png"}}
    graph["11"] = {"class_type": "CourierTelegramOutput", "inputs": {"images": ["10", 0], "filename_prefix": "x"}}
    status, reply, _ = await api.send("POST", "/courier/commands", json={"workflow": graph, "name": "fine"})
    assert status == 201, reply  # the same graph, its files under courier/
    graph[node]["inputs"][name] = value
    status, reply, _ = await api.send("POST", "/courier/commands", json={"workflow": graph, "name": "leak"})
    assert (status, reply["error"]["code"]) == (400, "file_input_refused"), reply
    assert reply["error"]["message"] == i18n.text("de", "file_input_refused", node_id=node,
                                                  node_type=graph[node]["class_type"], input_name=name)
    assert value not in reply["error"]["message"]
    assert await commands.get_command(store.pool, "leak") is None
