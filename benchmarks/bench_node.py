"""The Benchmark node against ComfyUI's own clock: its overhead, and how well it agrees.

    COMFYUI_DIR=/path/to/ComfyUI python benchmarks/bench_node.py [--repeats 5] [--pairs 12]

Starts a real ComfyUI (``--cpu`` unless ``--gpu``) with the pack and runs a
weight-free workflow made of built-in nodes: an image is blurred, sharpened,
and goes through the ``pixel_space`` VAE (ComfyUI's weight-free VAE) placed
by Device Assign, with a tiled decode (which reports progress, so it/s
shows), then a preview.

- ``bench_vs_comfy_time_pct``: one Benchmark session (warm-up + ``--repeats``);
  each measured run's time as the node reports it (ComfyUI's log line
  "Courier benchmark …: run k/N t s") against ComfyUI's own "Prompt executed
  in" line of that prompt. The largest difference, in percent; the log prints
  two decimals, so runs of a second or more keep the rounding below 0.5 %.
- ``bench_node_overhead_pct``: what a measured run pays for the node, over
  that workflow's median run. Run-to-run noise on a shared machine (±15 %
  here) hides a 1 % effect in whole runs, so the cost is measured apart: a
  second process runs ComfyUI's own executor (``PromptExecutor``, as
  ``main.py`` does, without the HTTP server) on a small copy of the workflow,
  alternating plain runs (made to recompute the way the node does it) with
  measured Benchmark runs, a few hundred pairs timed by ``perf_counter``.
  The median paired difference is the node's cost per run
  (``bench_node_overhead_ms``; ``bench_node_overhead_small_pct`` is it over
  the small runs, a harsher ratio).

Then both again on a real sampler (figures ending ``_sampler``): the pack's tiny SD 1.x
checkpoint (``python <pack> tiny-models``, written into the scratch models folder) through
CheckpointLoaderSimple, Device Assign, KSampler (euler) and VAEDecode, ``--sampler-steps`` at
``--sampler-size`` px, a run of a second or more; the overhead pairs run 2 steps at 64 px.

Also prints the node's report (stderr) and checks that the run was stored.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import importlib.util
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

from _common import REPO_ROOT, Deadline, comfyui_dir_or_exit, figure, load_runner, note, settle, write_figures

TINY_CHECKPOINT = "tiny-sd15.safetensors"  # tiny_models.CHECKPOINT's name
RUN_KEY = "courier_benchmark_run"  # gpu/session.py: the key the Benchmark node tags its runs with
PLAIN_KEY = "bench_node_run"  # the same trick for the plain runs
BENCH = "20"


def workflow(device: str, size: int, benchmark: dict | None) -> dict:
    prompt = {
        "1": {"class_type": "EmptyImage", "inputs": {"width": size, "height": size, "batch_size": 1,
                                                      "color": 0x336699}},
        # blur before the VAE: on a CPU, conv2d on the decoder's channels-last output is ~40x slower
        "2": {"class_type": "ImageBlur", "inputs": {"image": ["1", 0], "blur_radius": 15, "sigma": 4.0}},
        "3": {"class_type": "ImageSharpen", "inputs": {"image": ["2", 0], "sharpen_radius": 2,
                                                       "sigma": 1.0, "alpha": 1.0}},
        "4": {"class_type": "VAELoader", "inputs": {"vae_name": "pixel_space"}},
        "5": {"class_type": "CourierDeviceAssign", "inputs": {"device": device, "vae": ["4", 0]}},
        "6": {"class_type": "VAEEncode", "inputs": {"pixels": ["3", 0], "vae": ["5", 2]}},
        "7": {"class_type": "VAEDecodeTiled", "inputs": {"samples": ["6", 0], "vae": ["5", 2],
                                                         "tile_size": 256, "overlap": 32,
                                                         "temporal_size": 64, "temporal_overlap": 8}},
        "8": {"class_type": "ImageScale", "inputs": {"image": ["7", 0], "upscale_method": "area",
                                                     "width": 64, "height": 64, "crop": "disabled"}},
        "9": {"class_type": "PreviewImage", "inputs": {"images": ["8", 0]}},
    }
    if benchmark is not None:
        prompt[BENCH] = {"class_type": "CourierBenchmark", "inputs": benchmark}
        prompt["21"] = {"class_type": "PreviewAny", "inputs": {"source": [BENCH, 0]}}
        prompt["22"] = {"class_type": "PreviewImage", "inputs": {"images": [BENCH, 1]}}
    return prompt


def sampler_workflow(device: str, size: int, benchmark: dict | None, steps: int = 4) -> dict:
    """Text to image on the tiny checkpoint, its MODEL, CLIP and VAE placed by Device Assign."""
    prompt = {
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": TINY_CHECKPOINT}},
        "2": {"class_type": "CourierDeviceAssign", "inputs": {"device": device, "model": ["1", 0], "clip": ["1", 1],
                                                              "vae": ["1", 2]}},
        "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "a lighthouse", "clip": ["2", 1]}},
        "4": {"class_type": "EmptyLatentImage", "inputs": {"width": size, "height": size, "batch_size": 1}},
        "5": {"class_type": "KSampler", "inputs": {"model": ["2", 0], "seed": 1, "steps": steps, "cfg": 7.0,
                                                   "sampler_name": "euler", "scheduler": "normal",
                                                   "positive": ["3", 0], "negative": ["3", 0],
                                                   "latent_image": ["4", 0], "denoise": 1.0}},
        "6": {"class_type": "VAEDecode", "inputs": {"samples": ["5", 0], "vae": ["2", 2]}},
        "9": {"class_type": "PreviewImage", "inputs": {"images": ["6", 0]}},
    }
    if benchmark is not None:
        prompt[BENCH] = {"class_type": "CourierBenchmark", "inputs": benchmark}
        prompt["21"] = {"class_type": "PreviewAny", "inputs": {"source": [BENCH, 0]}}
        prompt["22"] = {"class_type": "PreviewImage", "inputs": {"images": [BENCH, 1]}}
    return prompt


def small_sampler_workflow(device: str, size: int, benchmark: dict | None) -> dict:
    """The overhead pairs' sampler runs: two steps, as short as a real sampler run gets (less noise)."""
    return sampler_workflow(device, size, benchmark, steps=2)


WORKFLOWS = {"weight-free": workflow, "sampler": small_sampler_workflow}


def write_tiny_models(comfyui_dir, runner, models) -> None:
    """The pack's own command, with ComfyUI's interpreter (torch, safetensors)."""
    started = time.perf_counter()
    subprocess.run([runner.comfyui_python(comfyui_dir), str(REPO_ROOT), "tiny-models", "--dest", str(models)],
                   check=True, capture_output=True, timeout=300)
    note(f"tiny models written in {time.perf_counter() - started:.1f} s")


def plain_run(prompt: dict, tag: str) -> dict:
    """The prompt with every node that has a linked input made to recompute."""
    tagged = json.loads(json.dumps(prompt))
    for node in tagged.values():
        if any(isinstance(v, list) and len(v) == 2 for v in node["inputs"].values()):
            node["inputs"][PLAIN_KEY] = tag
    return tagged


class Client:
    def __init__(self, server):
        self.server = server
        self.client_id = uuid.uuid4().hex

    def queue(self, prompt: dict) -> str:
        body = json.dumps({"prompt": prompt, "client_id": self.client_id}).encode()
        request = urllib.request.Request(self.server.url + "/prompt", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.loads(reply.read())["prompt_id"]

    def wait_idle(self, timeout: float, quiet: float = 1.0) -> None:
        """Until the queue has been empty for ``quiet`` seconds (sessions queue their own runs)."""
        deadline = time.monotonic() + timeout
        empty_since = None
        while time.monotonic() < deadline:
            queue = self.server.get_json("/queue")
            if queue["queue_running"] or queue["queue_pending"]:
                empty_since = None
            elif empty_since is None:
                empty_since = time.monotonic()
            elif time.monotonic() - empty_since >= quiet:
                return
            time.sleep(0.1)
        raise TimeoutError(f"ComfyUI still busy after {timeout:.0f} s\n" + self.server.log_tail())

    def history(self) -> dict:
        return self.server.get_json("/history?max_items=100000")


def agreement(log: str, session_id: str) -> list[tuple[float, float]]:
    """(node's seconds, ComfyUI's "Prompt executed in" seconds) for each measured run of a session."""
    pairs, pending = [], None
    for line in log.splitlines():
        mine = re.search(rf"Courier benchmark {session_id}: run \d+/\d+ ([\d.]+) s(.*)$", line)
        if mine:
            pending = None if "warm-up" in mine.group(2) else float(mine.group(1))
            continue
        comfy = re.search(r"Prompt executed in ([\d.]+) seconds", line)
        if comfy and pending is not None:
            pairs.append((pending, float(comfy.group(1))))
            pending = None
    return pairs


def report_of(history: dict) -> str:
    texts = [out["text"][0] for entry in history.values() for node, out in entry["outputs"].items()
             if node == "21" and "text" in out]
    return texts[-1] if texts else ""


class InProcessComfyUI:
    """ComfyUI's executor in this process, driven as main.py drives it, with no HTTP server.

    Needs ComfyUI's Python (its packages) and the ComfyUI folder; the pack is
    loaded the way ComfyUI loads custom nodes. The GPU check uses it too.
    """

    @classmethod
    async def start(cls, comfyui_dir: str, cpu: bool, models: str | None = None) -> InProcessComfyUI:
        base = tempfile.mkdtemp(prefix="courier-in-process-")  # previews go here, not into ComfyUI
        atexit.register(shutil.rmtree, base, True)
        sys.path.insert(0, str(comfyui_dir))
        sys.argv = [sys.argv[0], "--base-directory", base] + (["--cpu"] if cpu else [])
        import comfy.options

        comfy.options.enable_args_parsing()  # ComfyUI reads its flags from sys.argv on import
        import utils.extra_config  # noqa: F401 - first, as in main.py: later imports shadow `utils`
        if importlib.util.find_spec("av") is None:
            _stand_in_for_pyav()
        import comfy.utils
        import execution
        import folder_paths
        from comfy_execution.progress import get_progress_state
        from comfy_execution.utils import get_executing_context

        import nodes

        await nodes.init_extra_nodes(init_custom_nodes=False, init_api_nodes=False)
        if not await nodes.load_custom_node(str(REPO_ROOT)):
            raise RuntimeError(f"the pack at {REPO_ROOT} did not load")

        def progress_hook(value, total, preview, prompt_id=None, node_id=None):  # main.py's, unsent
            context = get_executing_context()
            if node_id is None and context is not None:
                node_id = context.node_id
            get_progress_state().update_progress(node_id, value, total, preview)

        comfy.utils.set_progress_bar_global_hook(progress_hook)
        if models:
            folder_paths.add_model_folder_path("checkpoints", f"{models}/checkpoints", is_default=True)
        return cls(nodes, execution.PromptExecutor(_NoClients(), cache_type=execution.CacheType.CLASSIC))

    def __init__(self, nodes, executor):
        self.nodes = nodes
        self.executor = executor

    def pack(self, module: str):
        """A module of the loaded pack, e.g. ``pack("gpu.session")``."""
        return sys.modules[str(REPO_ROOT).replace(".", "_x_") + "." + module]

    async def run(self, prompt: dict) -> float:
        """Execute one prompt; ComfyUI's "Prompt executed in" seconds (perf_counter around it)."""
        outputs = [node_id for node_id, node in prompt.items()
                   if getattr(self.nodes.NODE_CLASS_MAPPINGS[node["class_type"]], "OUTPUT_NODE", False)]
        began = time.perf_counter()
        await self.executor.execute_async(prompt, uuid.uuid4().hex, {}, outputs)
        seconds = time.perf_counter() - began
        if not self.executor.success:
            raise RuntimeError(f"prompt failed: {self.executor.status_messages[-1:]}")
        return seconds

    def ui(self) -> dict:
        """What the last prompt's output nodes showed, by node id."""
        return self.executor.history_result["outputs"]


def _stand_in_for_pyav() -> None:
    """Let ComfyUI import without PyAV (a 40 MB wheel, too big to carry to a GPU machine).

    ComfyUI's API module imports it for video types at import time; only video
    nodes call it, and the weight-free workflows here have none.
    """
    import types

    note("PyAV is not installed: a stand-in lets ComfyUI import (video nodes would fail)")
    names = ("av", "av.container", "av.subtitles", "av.subtitles.stream")
    modules = {name: types.ModuleType(name) for name in names}
    modules["av.container"].InputContainer = type("InputContainer", (), {})
    modules["av.subtitles.stream"].SubtitleStream = type("SubtitleStream", (), {})
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    sys.modules.update(modules)


class _NoClients:
    """What the executor asks of PromptServer when no client is connected."""

    client_id = None
    last_node_id = None
    sockets_metadata: dict = {}

    def send_sync(self, event, data, sid=None):
        pass


async def measure_overhead(comfy: InProcessComfyUI, device: str, size: int, pairs: int,
                           kind: str = "weight-free") -> dict:
    """Plain and measured runs in turn; the median paired difference is the node's cost."""
    workflow = WORKFLOWS[kind]
    session = comfy.pack("gpu.session")
    warm = 5
    # one more run than measured here: the session's last would be its report run
    bench = session.open_session("overhead", "in-process", repeats=warm + pairs + 1, warmup=0, save=False)
    prompt = workflow(device, size, {"repeats": 1, "warmup": 0})
    differences, plain_s = [], []
    for i in range(warm + pairs):
        plain = plain_run(workflow(device, size, None), str(i))
        measured = session.prompt_for_run(prompt, BENCH, bench, i + 1)  # a run the node measures
        if i % 2 == 0:
            without, with_node = await comfy.run(plain), await comfy.run(measured)
        else:
            with_node, without = await comfy.run(measured), await comfy.run(plain)
        if i >= warm:
            differences.append(with_node - without)
            plain_s.append(without)
    session.close_session(bench.id)
    q1, median, q3 = statistics.quantiles(differences, n=4)
    return {"pairs": pairs, "plain_median_s": statistics.median(plain_s), "overhead_s": median,
            "overhead_q1_s": q1, "overhead_q3_s": q3}


async def overhead_worker(comfyui_dir: str, cpu: bool, device: str, size: int, pairs: int,
                          kind: str = "weight-free", models: str | None = None) -> dict:
    return await measure_overhead(await InProcessComfyUI.start(comfyui_dir, cpu, models), device, size, pairs, kind)


def measure_session(server, client: Client, prompt: dict, suffix: str, repeats: int, timeout: float) -> float:
    """One Benchmark session: its figures against "Prompt executed in"; the median measured run (s)."""
    client.queue(prompt)
    client.wait_idle(timeout)
    text = report_of(client.history())
    note(text)
    session_id = re.findall(r"Courier benchmark (\w+): run 1/", server.log_text())[-1]
    pairs = agreement(server.log_text(), session_id)
    if len(pairs) != repeats:
        raise RuntimeError(f"expected {repeats} measured runs in the log, found {len(pairs)}")
    differences = [abs(mine - comfy) / comfy * 100 for mine, comfy in pairs]
    note("node vs Prompt executed in: " + ", ".join(f"{m:.3f}/{c:.2f}" for m, c in pairs))
    figure("bench_vs_comfy_time_pct" + suffix, max(differences), "%")
    figure("bench_vs_comfy_time_mean_pct" + suffix, statistics.mean(differences), "%")
    figure("bench_run_stored" + suffix, int("stored as benchmark run" in text), "bool")
    median = statistics.median(mine for mine, _ in pairs)
    figure("bench_workflow_median_s" + suffix, median, "s")
    return median


def measure_cost(comfyui_dir, runner, args, worker: dict, suffix: str, full_median: float, timeout: float) -> bool:
    """The node's cost per run from the in-process pairs (see the module docstring); False if out of time."""
    try:
        done = subprocess.run(
            [runner.comfyui_python(comfyui_dir), __file__, "--overhead-worker", json.dumps(
                {"comfyui_dir": str(comfyui_dir), "cpu": not args.gpu, "device": args.device, **worker})],
            capture_output=True, text=True, timeout=max(60, timeout), check=False)
    except subprocess.TimeoutExpired:
        note(f"the overhead runs outlasted the budget (--budget {args.budget:.0f}); try fewer --pairs")
        return False
    if done.returncode != 0:
        raise RuntimeError("overhead worker failed:\n" + done.stderr[-4000:])
    cost = json.loads(done.stdout.strip().splitlines()[-1])
    note(f"overhead worker ({worker['kind']}): {cost['pairs']} pairs of {worker['size']}px runs, plain median "
         f"{cost['plain_median_s'] * 1000:.2f} ms, node cost {cost['overhead_s'] * 1000:.3f} ms "
         f"(interquartile {cost['overhead_q1_s'] * 1000:.3f} … {cost['overhead_q3_s'] * 1000:.3f} ms)")
    figure("bench_node_overhead_pct" + suffix, cost["overhead_s"] / full_median * 100, "%")
    figure("bench_node_overhead_ms" + suffix, cost["overhead_s"] * 1000, "ms")
    figure("bench_node_overhead_small_pct" + suffix, cost["overhead_s"] / cost["plain_median_s"] * 100, "%")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="measured runs per session (default 5)")
    parser.add_argument("--pairs", type=int, default=300, help="overhead pairs (default 300; 0 skips)")
    parser.add_argument("--small-size", type=int, default=256, help="image side for the overhead runs")
    parser.add_argument("--overhead-worker", help=argparse.SUPPRESS)  # JSON; run by this script
    parser.add_argument("--size", type=int, default=1536, help="image side in pixels (default 1536)")
    parser.add_argument("--sampler-size", type=int, default=128, help="the sampler run's side (default 128)")
    parser.add_argument("--sampler-steps", type=int, default=12, help="the sampler run's steps (default 12)")
    parser.add_argument("--sampler-pairs", type=int, default=200,
                        help="sampler overhead pairs (default 200; 0 skips)")
    parser.add_argument("--no-sampler", action="store_true", help="only the weight-free workflow")
    parser.add_argument("--gpu", action="store_true", help="run ComfyUI on its GPU (no --cpu)")
    parser.add_argument("--device", default="cpu", help="Device Assign's choice (default cpu)")
    parser.add_argument("--budget", type=float, default=720, help="total seconds allowed (default 720)")
    parser.add_argument("--out", default=str(REPO_ROOT / "artifacts" / "benchmarks" / "bench_node.json"),
                        help="also write the figures here as JSON")
    args = parser.parse_args()
    if args.overhead_worker:
        print(json.dumps(asyncio.run(overhead_worker(**json.loads(args.overhead_worker)))))
        return 0
    comfyui_dir = comfyui_dir_or_exit()
    runner = load_runner()
    deadline = Deadline(args.budget)

    class Server(runner.ComfyUIProcess):
        def command(self):
            command = super().command()
            return [part for part in command if part != "--cpu"] if args.gpu else command

    scratch = runner.scratch_directory("courier-bench-node-")
    server = Server(comfyui_dir, scratch / "comfyui")
    models = server.base_directory / "models"
    try:
        if not args.no_sampler:
            write_tiny_models(comfyui_dir, runner, models)
        server.start()
        note(f"ComfyUI ready in {server.ready_seconds:.1f} s; database: "
             f"{settle(server, min(60, deadline.remaining()))[1]}")
        client = Client(server)

        def inputs(name: str) -> dict:
            return {"repeats": args.repeats, "warmup": 1, "workflow_name": name, "host": "", "save": True}

        # 1. one session each: the node's times against "Prompt executed in"
        weight_free = workflow(args.device, args.size, inputs("bench_node weight-free"))
        medians = {"": measure_session(server, client, weight_free, "", args.repeats, deadline.remaining())}
        if not args.no_sampler:
            prompt = sampler_workflow(args.device, args.sampler_size, inputs("bench_node tiny sd15"),
                                      args.sampler_steps)
            medians["_sampler"] = measure_session(server, client, prompt, "_sampler", args.repeats,
                                                  deadline.remaining())
    finally:
        server.stop()
        server.kill_leftovers()

    # 2. overhead, measured apart from the server (see the module docstring)
    try:
        workers = [("", {"kind": "weight-free", "size": args.small_size, "pairs": args.pairs})]
        if not args.no_sampler:
            workers.append(("_sampler", {"kind": "sampler", "size": 64, "pairs": args.sampler_pairs,
                                         "models": str(models)}))
        for suffix, worker in workers:
            if worker["pairs"] <= 0:
                note(f"no pairs for {worker['kind']}: its overhead is not measured")
            elif not measure_cost(comfyui_dir, runner, args, worker, suffix, medians[suffix], deadline.remaining()):
                write_figures(args.out)
                return 1
    finally:
        runner.remove_tree(scratch)
    write_figures(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
