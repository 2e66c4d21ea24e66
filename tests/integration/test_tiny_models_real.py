"""Real sampling on the pack's tiny SD 1.x checkpoint (``python <pack> tiny-models``) in a real ComfyUI.

The session's ComfyUI (tests/fixtures/comfyui.py, ``--cpu --preview-method latent2rgb``) gets the
tiny checkpoint and LoRA linked into its models folder; the graphs are ComfyUI's own nodes, the
pack's by id. What the CI had never run: CheckpointLoaderSimple detecting SD 1.x, KSampler with its
progress and latent preview frames, LoraLoader, Device Assign on a real model and the Benchmark
node timing a sampler.
"""

import asyncio
import io
import json
import subprocess
import time
import uuid
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from PIL import Image

from comfyui_courier.core import i18n
from comfyui_courier.store import commands
from comfyui_courier.tests.fixtures.comfyui import comfyui_python
from comfyui_courier.tests.fixtures.tiny_models import link_tiny_models
from comfyui_courier.tests.gpu.test_comfyui_nodes import post_prompt, wait_for_report
from comfyui_courier.tests.support.courier import replies_to, running_courier, shown_text
from comfyui_courier.tests.support.requires import missing, require_comfyui
from comfyui_courier.tools.tiny_models import CHECKPOINT, LORA

pytestmark = pytest.mark.timeout(240)

RUN_S = 120.0
USER = 1818
SAMPLER = "5"
PREVIEW_IMAGE, JPEG = 1, 1  # ComfyUI's binary event type and image type (server.py BinaryEventTypes)
PROBE = Path(__file__).resolve().parents[1] / "support" / "probe_device_assign.py"
LOAD_PROBLEMS = ("unet missing", "unet unexpected", "clip missing", "Missing VAE keys", "no match",
                 "lora key not loaded", "invalid value encountered")


@pytest.fixture
def sampler(comfyui, tiny_models):
    """The session's ComfyUI with the tiny models in its models folder."""
    link_tiny_models(comfyui, tiny_models)
    return comfyui


def graph(*, steps=4, size=128, seed=1, lora: float | None = None, device: str | None = None,
          benchmark: dict | None = None) -> dict:
    """Text to image on the tiny checkpoint: loader (→ LoRA) (→ Device Assign) → KSampler → decode."""
    model, clip, vae = ["1", 0], ["1", 1], ["1", 2]
    prompt = {"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": CHECKPOINT.name}}}
    if lora is not None:
        prompt["10"] = {"class_type": "LoraLoader", "inputs": {"model": model, "clip": clip, "lora_name": LORA.name,
                                                               "strength_model": lora, "strength_clip": lora}}
        model, clip = ["10", 0], ["10", 1]
    if device is not None:
        prompt["11"] = {"class_type": "CourierDeviceAssign", "inputs": {"device": device, "model": model,
                                                                        "clip": clip, "vae": vae}}
        model, clip, vae = ["11", 0], ["11", 1], ["11", 2]
    prompt |= {
        "2": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": clip}},
        "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": clip}},
        "4": {"class_type": "EmptyLatentImage", "inputs": {"width": size, "height": size, "batch_size": 1}},
        SAMPLER: {"class_type": "KSampler", "inputs": {
            "model": model, "seed": seed, "steps": steps, "cfg": 7.0, "sampler_name": "euler",
            "scheduler": "normal", "positive": ["2", 0], "negative": ["3", 0], "latent_image": ["4", 0],
            "denoise": 1.0}},
        "6": {"class_type": "VAEDecode", "inputs": {"samples": [SAMPLER, 0], "vae": vae}},
        "7": {"class_type": "PreviewImage", "inputs": {"images": ["6", 0]}},
    }
    if benchmark is not None:
        prompt["20"] = {"class_type": "CourierBenchmark", "inputs": benchmark}
        prompt["21"] = {"class_type": "PreviewAny", "inputs": {"source": ["20", 0]}}
        prompt["22"] = {"class_type": "PreviewImage", "inputs": {"images": ["20", 1]}}
    return prompt


class Run:
    """One prompt run to its end while its websocket frames are collected."""

    def __init__(self, entry: dict, frames: list[dict], binary: list[bytes], log: str):
        self.entry, self.frames, self.binary, self.log = entry, frames, binary, log

    def of(self, kind: str) -> list[dict]:
        return [frame["data"] for frame in self.frames if frame["type"] == kind]


async def run_watching(server, prompt: dict) -> Run:
    client_id = uuid.uuid4().hex
    log_before = len(server.log_text())
    frames, binary = [], []
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(f"{server.url}/ws?clientId={client_id}") as ws:
            async with http.post(f"{server.url}/prompt", json={"prompt": prompt, "client_id": client_id}) as reply:
                answer = await reply.json()
                assert reply.status == 200 and answer["node_errors"] == {}, answer
            prompt_id = answer["prompt_id"]
            async with asyncio.timeout(RUN_S):
                async for message in ws:
                    if message.type == aiohttp.WSMsgType.BINARY:
                        binary.append(message.data)
                        continue
                    frame = json.loads(message.data)
                    frames.append(frame)
                    data = frame.get("data", {})
                    if frame["type"] == "executing" and data.get("prompt_id") == prompt_id and data["node"] is None:
                        break  # main.py sends it once the history is written
        async with http.get(f"{server.url}/history/{prompt_id}") as reply:
            entry = (await reply.json())[prompt_id]
    errors = [data for kind, data in entry["status"]["messages"] if kind == "execution_error"]
    assert entry["status"]["status_str"] == "success", errors
    return Run(entry, frames, binary, server.log_text()[log_before:])


def picture(server, run: Run, node: str = "7") -> np.ndarray:
    (ref,) = run.entry["outputs"][node]["images"]
    status, data = server.get(f"/view?filename={ref['filename']}&subfolder={ref['subfolder']}&type={ref['type']}")
    assert status == 200
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.float32) / 255


async def test_the_tiny_checkpoint_is_loaded_as_sd1_and_sampled_to_a_picture(sampler):
    started = time.monotonic()
    run = await run_watching(sampler, graph())
    seconds = time.monotonic() - started
    assert not [problem for problem in LOAD_PROBLEMS if problem in run.log], run.log
    assert "model_type EPS" in run.log and "SD1ClipModel" in run.log, run.log  # SD15's model and text encoder
    pixels = picture(sampler, run)
    assert pixels.shape == (128, 128, 3) and np.isfinite(pixels).all()
    assert pixels.std() > 0.05, "a flat picture: the decoder got zeros or NaNs"
    assert seconds < 60, seconds  # loading included; the sampling itself is about a second


async def test_sampling_sends_progress_frames_and_latent_previews(sampler):
    run = await run_watching(sampler, graph(steps=4, seed=2))
    steps = [(p["value"], p["max"]) for p in run.of("progress") if p["node"] == SAMPLER]
    assert steps == [(1, 4), (2, 4), (3, 4), (4, 4)], run.of("progress")
    previews = [frame for frame in run.binary if int.from_bytes(frame[:4], "big") == PREVIEW_IMAGE]
    assert previews, f"no preview frames among {len(run.binary)} binary frames"
    for frame in previews:
        assert int.from_bytes(frame[4:8], "big") == JPEG and frame[8:11] == b"\xff\xd8\xff"
        width, height = Image.open(io.BytesIO(frame[8:])).size
        assert width == height >= 16  # latent2rgb's picture of the 16x16 latent, scaled up


async def test_the_tiny_lora_is_loaded_by_lora_loader_and_changes_the_picture(sampler):
    plain = await run_watching(sampler, graph(seed=3))
    with_lora = await run_watching(sampler, graph(seed=3, lora=1.0))
    assert not [problem for problem in LOAD_PROBLEMS if problem in with_lora.log], with_lora.log
    assert "Requested to load" in with_lora.log  # the patched model was loaded again
    difference = np.abs(picture(sampler, plain) - picture(sampler, with_lora)).mean()
    assert difference > 0.001, difference


def probe(models: Path, device: str, cpu: bool) -> dict:
    comfyui_dir = require_comfyui()
    done = subprocess.run([comfyui_python(comfyui_dir), str(PROBE), str(comfyui_dir), str(models), device,
                           *(["--cpu"] if cpu else [])], capture_output=True, text=True, timeout=RUN_S, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_device_assign_places_the_real_model_on_the_cpu(tiny_models):
    found = probe(tiny_models, "cpu", cpu=True)
    assert found["model_class"] == "SD15"
    assert found["placed"] == {"model": "cpu", "clip": "cpu", "vae": "cpu", "vae_device": "cpu", "offload": "cpu"}
    assert found["weights"] == {"unet": "{'cpu'}", "vae": "{'cpu'}"}
    assert found["image"]["finite"] and found["image"]["shape"] == [1, 64, 64, 3]


@pytest.mark.gpu
def test_device_assign_places_the_real_model_on_the_last_gpu(tiny_models):
    count = subprocess.run([comfyui_python(require_comfyui()), "-c", "import torch; print(torch.cuda.device_count())"],
                           capture_output=True, text=True, timeout=60, check=False)
    if count.returncode != 0 or int(count.stdout.strip() or 0) < 1:
        missing("a CUDA GPU")
    device = f"cuda:{int(count.stdout) - 1}"
    found = probe(tiny_models, device, cpu=False)
    assert found["original"]["model"] == "cuda:0"  # ComfyUI's main device, untouched by the clone
    assert found["placed"]["model"] == found["placed"]["clip"] == found["placed"]["vae"] == device
    assert found["placed"]["offload"] == "cpu"
    assert found["weights"]["unet"] == f"{{'{device}'}}" and found["weights"]["vae"] == f"{{'{device}'}}"
    assert found["image"]["finite"]


def test_the_benchmark_node_times_real_sampling(sampler):
    name = f"tiny sd15 {uuid.uuid4().hex[:6]}"
    status, answer = post_prompt(sampler, graph(steps=4, seed=4, device="cpu", benchmark={
        "repeats": 2, "warmup": 1, "workflow_name": name, "host": "ci", "save": False}))
    assert status == 200, answer
    report, _ = wait_for_report(sampler, name)
    text = report["outputs"]["21"]["text"][0]
    assert "2 measured runs after 1 warm-up" in text, text
    sampler_line = next(line for line in text.splitlines() if line.strip().startswith(f"#{SAMPLER} "))
    assert "KSampler" in sampler_line and "it/s" in sampler_line, text
    assert "CourierDeviceAssign" in text, text


def published(steps: int) -> dict:
    """A command's graph on the tiny checkpoint: Telegram Input's prompt and seed → … → Telegram Output."""
    prompt = graph(steps=steps, seed=0)
    prompt["2"]["inputs"]["text"] = ["30", 0]
    prompt[SAMPLER]["inputs"]["seed"] = ["30", 3]
    prompt["30"] = {"class_type": "CourierTelegramInput", "inputs": {
        "command": "tiny", "prompt": "", "seed": 0, "width": 512, "height": 512, "image": "",
        "chat_id": "", "user_id": ""}}
    prompt["7"] = {"class_type": "CourierTelegramOutput", "inputs": {"images": ["6", 0],
                                                                     "filename_prefix": "courier/tiny"}}
    return prompt


async def test_a_published_command_on_the_tiny_checkpoint_answers_with_progress_eta_and_a_preview(
        comfyui_factory, tiny_models, pg_database, botapi, botapi_bot, tmp_path):
    """The backend's pack on the bot's database (results are handed over through it), as in production."""
    server = comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database},
                             extra_args=["--preview-method", "latent2rgb"])
    link_tiny_models(server, tiny_models)
    await asyncio.to_thread(server.start)
    async with running_courier(botapi, botapi_bot, pg_database, server.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)) as courier:
        await commands.put_command(courier.store.pool, "tiny", workflow=published(steps=12))
        request = botapi_bot.inject_text(USER, "/tiny a cat")
        await botapi_bot.wait_for_call("sendDocument", timeout=RUN_S, where=replies_to(request))
    def step(value: int, **eta) -> str:
        return i18n.text("en", "progress_eta" if eta else "progress", name="tiny", value=value, max=12,
                         percent=100 * value // 12, **eta)

    shown = [shown_text(c) for c in botapi_bot.outbox
             if c.method in ("editMessageText", "editMessageCaption", "editMessageMedia", "sendPhoto")]
    plain = {step(value) for value in range(1, 13)}
    with_eta = {step(value, seconds=s) for value in range(1, 13) for s in range(1, int(RUN_S))}
    assert len((plain | with_eta).intersection(shown)) >= 2, shown
    assert with_eta.intersection(shown), f"no step showed the time left: {shown}"
    assert any(c.method == "sendPhoto" for c in botapi_bot.outbox), "no live preview was sent"
