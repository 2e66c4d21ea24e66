"""Threat row: a hostile workflow published by an admin, run by the bot on a real ComfyUI.

It cannot make Telegram Output send to a chat other than the job's (the editor gate blanks an
unproved ``send_to_chat``, bot jobs included), cannot write outside ``output/courier/`` through
``filename_prefix`` (forced under it; ``..`` refused before the run, with no server path in the
error), and cannot outlive ``COURIER_JOB_TIMEOUT_S`` (the job fails and its prompt is interrupted).
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from comfyui_courier.jobs.comfy.client import ComfyClient
from comfyui_courier.jobs.errors import ComfyError
from comfyui_courier.store import commands
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.graphs import cpu_bound

USER, VICTIM = 601, 602
PATIENT = 603  # the timeout test's own user: its /history filter must not find the other test's prompt
TIMEOUT_S = 120.0


def saving(prefix: str) -> dict:
    return {"1": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 0}},
            "2": {"class_type": "CourierTelegramOutput", "inputs": {"filename_prefix": prefix, "images": ["1", 0]}}}


@pytest.mark.parametrize("prefix", ["../escaped", "courier/../../escaped", "/tmp/escaped", "..\\escaped"])
async def test_filename_prefix_cannot_leave_output_courier(comfyui, prefix):
    async with ComfyClient(comfyui.url) as client:
        with pytest.raises(ComfyError, match="filename_prefix must be a relative name under courier/") as failed:
            await client.run_prompt(saving(prefix))
    assert str(comfyui.base_directory) not in str(failed.value)  # no server path in what /history keeps
    assert not any(comfyui.base_directory.rglob("escaped*"))


async def test_other_folders_are_kept_under_courier(comfyui):
    async with ComfyClient(comfyui.url) as client:
        result = await client.run_prompt(saving("other/x"))
    (ref,) = result.outputs["2"]["images"]
    assert ref["subfolder"] == "courier/other"
    assert (comfyui.base_directory / "output" / "courier" / "other" / ref["filename"]).is_file()


async def test_a_published_send_to_chat_reaches_only_the_jobs_chat(comfyui, botapi, botapi_bot, pg_database,
                                                                 tmp_path):
    hostile = cpu_bound(64, 1)
    hostile["4"]["inputs"]["send_to_chat"] = str(VICTIM)  # as if stored past publish's reset
    env = {"COURIER_ALLOWED_USERS": f"{USER},{VICTIM}", "COURIER_ADMIN_TOKEN": "a-token-the-graph-lacks"}
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path, **env) as service:
        await commands.put_command(service.store.pool, "hostile", workflow=hostile, description="hostile graph")
        botapi_bot.inject_text(VICTIM, "/help")
        botapi_bot.inject_text(USER, "/hostile a fox")
        started = time.monotonic()
        while not any(c.method == "sendDocument" and str(c.params.get("chat_id")) == str(USER)
                      for c in botapi_bot.calls):
            assert time.monotonic() - started < TIMEOUT_S, [(c.method, c.params) for c in botapi_bot.calls
                                                            if c.method != "getUpdates"][-6:]
            await asyncio.sleep(0.1)
    assert [c for c in botapi_bot.calls if c.method in ("sendDocument", "sendPhoto")
            and str(c.params.get("chat_id")) == str(VICTIM)] == []


async def test_a_published_graph_cannot_outlive_the_job_timeout(comfyui, botapi, botapi_bot, pg_database, tmp_path):
    env = {"COURIER_ALLOWED_USERS": str(PATIENT), "COURIER_JOB_TIMEOUT_S": "1"}
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path, **env) as service:
        await commands.put_command(service.store.pool, "endless", workflow=cpu_bound(2048, 24),
                                   description="CPU-bound for several seconds")
        started = time.monotonic()
        botapi_bot.inject_text(PATIENT, "/endless a fox")
        while not any(str(c.params.get("chat_id")) == str(PATIENT) and "took longer than 1 s and was stopped"
                      in str(c.params.get("text", "")) for c in botapi_bot.calls):  # posted or edited in
            assert time.monotonic() - started < TIMEOUT_S, "no timeout reply"
            await asyncio.sleep(0.1)
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as http:
        while True:  # the prompt is interrupted, not left running to its end
            async with http.get(f"{comfyui.url}/history") as reply:
                records = [r for r in (await reply.json()).values()
                           if r["prompt"][2]["1"]["inputs"].get("user_id") == str(PATIENT)]
            if records and records[-1]["status"].get("completed") is not None:
                record = records[-1]
                break
            assert time.monotonic() < deadline, "the timed-out prompt is still running"
            await asyncio.sleep(0.1)
    kinds = [message[0] for message in record["status"]["messages"]]
    assert "execution_interrupted" in kinds, kinds
    assert time.monotonic() - started < 60
