"""Missing weights explained, end to end: real python-telegram-bot on the Bot API emulator, real
PostgreSQL and a real ComfyUI (COMFYUI_DIR) without the shipped commands' weights. A command lacking
its model files says which, where each goes and where to download it, one line each; ✏️ with
``COURIER_EDIT_COMMAND`` left at ``qwen``, whose files no backend has, edits with ``/img`` instead
(img2img on the tiny SD 1.x checkpoint, tests/fixtures/tiny_models.py) and says so."""

import pytest

from comfyui_courier.bot.buttons import FALLBACK_EDIT_COMMAND, edit_choice
from comfyui_courier.core import i18n
from comfyui_courier.jobs.model_names import DEFAULT_STRENGTH
from comfyui_courier.jobs.readiness import needed_files
from comfyui_courier.jobs.seed import seed_manifest, shipped_workflow
from comfyui_courier.store import backends
from comfyui_courier.tests.fixtures.tiny_models import link_tiny_models
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.polling import until
from comfyui_courier.tests.support.requires import require_comfyui
from comfyui_courier.tools.tiny_models import CHECKPOINT

USER = 111
JOB_TIMEOUT_S = 120
MANIFEST = seed_manifest()
QWEN = needed_files(shipped_workflow(MANIFEST["qwen"]))


def en(key: str, **params) -> str:
    return i18n.text("en", key, **params)


def test_edit_falls_back_only_when_every_backend_lacks_a_file_and_the_fallback_is_there():
    all_of_them = [file.name for file in QWEN]
    assert edit_choice("qwen", QWEN, [[], all_of_them[1:]], True) == FALLBACK_EDIT_COMMAND
    assert edit_choice("qwen", QWEN, [[], all_of_them], True) == "qwen"  # one backend can run it
    assert edit_choice("qwen", QWEN, [[]], False) == "qwen"  # no /img, or no checkpoint for it: qwen says what it lacks
    assert edit_choice("qwen", QWEN, [], True) == "qwen"  # no backend's models known yet
    assert edit_choice("demoedit", [], [[]], True) == "demoedit"  # needs no model file
    assert edit_choice(FALLBACK_EDIT_COMMAND, QWEN, [[]], True) == FALLBACK_EDIT_COMMAND


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, tmp_path, request):
    require_comfyui()
    comfyui = request.getfixturevalue("comfyui")
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)) as service:
        yield service


async def test_a_missing_model_reply_says_where_to_download_each_file(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/f a cat")
    failed = await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].startswith("/f failed"),
                                            timeout=JOB_TIMEOUT_S)
    lines = failed.params["text"].removeprefix("/f failed: ").splitlines()  # one line per file
    loader = {value: node["class_type"] for node in shipped_workflow(MANIFEST["f"]).values()
              for value in node["inputs"].values() if isinstance(value, str)}
    assert sorted(lines) == sorted(en("missing_model_from", filename=model["name"], folder=model["folder"],
                                      node_type=loader[model["name"]], url=model["url"])
                                   for model in MANIFEST["f"]["models"])
    assert all(line.split()[-1].startswith("https://huggingface.co/") for line in lines)  # the link ends the line


@pytest.fixture
async def courier_with_tiny_models(botapi, botapi_bot, pg_database, tmp_path, request, tiny_models):
    """The session's ComfyUI with the tiny SD 1.x checkpoint: /img can run, /qwen cannot."""
    require_comfyui()
    comfyui = request.getfixturevalue("comfyui")
    link_tiny_models(comfyui, tiny_models)
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)) as service:
        yield service


async def test_edit_without_qwen_models_falls_back_to_img_and_says_so(courier_with_tiny_models, botapi_bot):
    courier = courier_with_tiny_models
    pool = courier.store.pool
    assert courier.settings.edit_command == "qwen"  # COURIER_EDIT_COMMAND unset
    await until(lambda: _models_read(pool), 30, "the backend's models read by its health check")

    botapi_bot.inject_text(USER, "/demo --size 128x128 a fox")
    message_id, edit = await botapi_bot.emulator.wait_for(lambda: _edit_button(botapi_bot), timeout=JOB_TIMEOUT_S)
    await until(lambda: _succeeded(pool, 1), JOB_TIMEOUT_S, "the /demo job done")  # its picture recorded
    botapi_bot.inject_callback_query(USER, message_id, edit)
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"] == en("edit_ask", minutes=10),
                                   timeout=30)
    botapi_bot.inject_text(USER, "--steps 4 a cat")

    await botapi_bot.wait_for_call("sendMessage", timeout=30, where=lambda c: c.params["text"] == en(
        "edit_fallback", name="qwen", fallback=FALLBACK_EDIT_COMMAND))
    await until(lambda: _succeeded(pool, 2), JOB_TIMEOUT_S, "the edit done on the tiny checkpoint")
    assert sum(c.method == "sendDocument" for c in botapi_bot.outbox) == 2
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT command, params FROM courier_jobs ORDER BY id")
    first_result = next(c for c in botapi_bot.outbox if c.method == "sendDocument").result["document"]["file_id"]
    img = rows[1]["params"]
    assert [row["command"] for row in rows] == ["demo", FALLBACK_EDIT_COMMAND]
    assert (img["prompt"], img["image_file_id"]) == ("a cat", first_result)  # on the picture
    graph = img["workflow"]
    assert {node["inputs"].get("ckpt_name") for node in graph.values()} >= {CHECKPOINT.name}  # the default model
    (sampler,) = [node["inputs"] for node in graph.values() if node["class_type"] == "KSampler"]
    assert graph[sampler["latent_image"][0]]["class_type"] == "VAEEncode"  # img2img: from the picture
    assert sampler["denoise"] == DEFAULT_STRENGTH


async def _succeeded(pool, count: int) -> bool:
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT count(*) FROM courier_jobs WHERE status = 'succeeded'") >= count


async def _models_read(pool) -> bool:
    return any(row.checked_at is not None and row.healthy for row in await backends.list_backends(pool))


def _edit_button(bot) -> tuple[int, str] | None:
    """The message the first result's ✏️ went under, and its callback data (None before it is there)."""
    for call in bot.outbox:
        for row in (call.params.get("reply_markup") or {}).get("inline_keyboard", []):
            for button in row:
                if button["text"] == en("button_edit"):
                    return call.params.get("message_id") or call.result["message_id"], button["callback_data"]
    return None
