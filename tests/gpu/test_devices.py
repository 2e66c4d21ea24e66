import pytest
import torch

from comfyui_courier.gpu import devices
from comfyui_courier.gpu.devices import Accelerators, DeviceUnavailable
from comfyui_courier.tests.support.requires import require_comfy_api

require_comfy_api()
from comfyui_courier.nodes.device_assign import DeviceAssign  # noqa: E402 - needs comfy_api importable


def assign(device, **models):
    """The node's outputs, as ComfyUI runs it."""
    return DeviceAssign.execute(device, **models).args


class StandInPatcher:
    """What ComfyUI's ModelPatcher offers the placement code: devices and clone()."""

    def __init__(self, load_device, offload_device, model=None):
        self.load_device = load_device
        self.offload_device = offload_device
        self.model = model if model is not None else object()
        self.clones = 0

    def clone(self):
        self.clones += 1
        return StandInPatcher(self.load_device, self.offload_device, self.model)


class StandInClip:
    def __init__(self, patcher):
        self.patcher = patcher
        self.cond_stage_model = patcher.model
        self.layer_idx = None

    def clone(self):  # like comfy.sd.CLIP.clone: shares the encoder, clones the patcher
        n = StandInClip(self.patcher.clone())
        n.cond_stage_model = self.cond_stage_model
        n.layer_idx = self.layer_idx
        return n


class StandInVae:
    def __init__(self, patcher, device):
        self.patcher = patcher
        self.device = device
        self.first_stage_model = patcher.model
        self.vae_dtype = "bf16"


@pytest.mark.parametrize("found, expected", [
    (Accelerators(), ["auto", "cpu"]),
    (Accelerators(cuda_count=2), ["auto", "cpu", "cuda:0", "cuda:1"]),
    (Accelerators(mps=True), ["auto", "cpu", "mps"]),
])
def test_choices_list_what_torch_sees(found, expected):
    assert devices.device_choices(found) == expected


@pytest.mark.parametrize("choice, found, message", [
    ("cuda:3", Accelerators(cuda_count=1), "cuda:3 is not available: this machine has 1 CUDA device (cuda:0)"),
    ("cuda:2", Accelerators(cuda_count=2),
     "cuda:2 is not available: this machine has 2 CUDA devices (cuda:0, cuda:1)"),
    ("cuda:0", Accelerators(), "cuda:0 is not available: this machine has no CUDA device"),
    ("mps", Accelerators(cuda_count=1), "mps is not available: Apple's MPS backend is not available"),
    ("tpu", Accelerators(), "tpu is not available: choose one of auto, cpu"),
])
def test_missing_devices_are_named_with_what_exists(choice, found, message):
    with pytest.raises(DeviceUnavailable) as caught:
        devices.check_device(choice, found)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("choice", ["auto", "cpu", "cuda:0", "cuda:1"])
def test_existing_devices_pass(choice):
    devices.check_device(choice, Accelerators(cuda_count=2))


def test_model_is_placed_on_a_clone_and_the_original_is_untouched():
    original = StandInPatcher("cuda:0", "cpu")
    placed = devices.place_model(original, "cuda:1")
    assert placed is not original and placed.model is original.model  # weights shared, not copied
    assert (placed.load_device, placed.offload_device) == ("cuda:1", "cpu")
    assert (original.load_device, original.offload_device) == ("cuda:0", "cpu")


def test_highvram_models_rest_on_the_chosen_device_not_the_old_one():
    original = StandInPatcher("cuda:0", "cuda:0")  # --highvram: offload == load
    placed = devices.place_model(original, "cuda:1")
    assert (placed.load_device, placed.offload_device) == ("cuda:1", "cuda:1")


def test_clip_gets_its_own_patcher():
    original = StandInClip(StandInPatcher("cuda:0", "cpu"))
    placed = devices.place_clip(original, "cpu")
    assert placed.cond_stage_model is original.cond_stage_model
    assert placed.patcher.load_device == "cpu"
    assert original.patcher.load_device == "cuda:0"


def test_vae_is_copied_with_its_own_patcher_and_device():
    patcher = StandInPatcher("cuda:0", "cpu")
    original = StandInVae(patcher, "cuda:0")
    placed = devices.place_vae(original, "cpu")
    assert (placed.device, placed.patcher.load_device) == ("cpu", "cpu")
    assert placed.first_stage_model is original.first_stage_model
    assert (original.device, original.patcher, patcher.load_device) == ("cuda:0", patcher, "cuda:0")


def test_node_auto_returns_the_inputs_as_they_are():
    model, clip = StandInPatcher("cuda:0", "cpu"), StandInClip(StandInPatcher("cuda:0", "cpu"))
    assert assign("auto", model=model, clip=clip) == (model, clip, None)
    assert model.clones == 0


def test_node_places_every_connected_input_and_leaves_no_state_behind():
    model = StandInPatcher("cuda:0", "cpu")
    clip = StandInClip(StandInPatcher("cuda:0", "cpu"))
    vae = StandInVae(StandInPatcher("cuda:0", "cpu"), "cuda:0")
    before = dict(vars(DeviceAssign))
    for _ in range(2):  # a second run starts from the same, unchanged objects
        placed_model, placed_clip, placed_vae = assign("cpu", model=model, clip=clip, vae=vae)
        cpu = torch.device("cpu")
        assert placed_model.load_device == placed_clip.patcher.load_device == placed_vae.device == cpu
    assert model.load_device == clip.patcher.load_device == vae.device == vae.patcher.load_device == "cuda:0"
    assert model.clones == 2 and dict(vars(DeviceAssign)) == before


def test_node_lists_cpu_and_validates_with_a_readable_message():
    kind, options = DeviceAssign.INPUT_TYPES()["required"]["device"]
    assert kind == "COMBO" and options["options"][:2] == ["auto", "cpu"] and options["default"] == "auto"
    assert DeviceAssign.validate_inputs("cpu") is True
    assert DeviceAssign.validate_inputs("cuda:99").startswith("cuda:99 is not available: this machine has")


def test_node_refuses_a_missing_device_when_called_directly():
    with pytest.raises(DeviceUnavailable):
        assign("cuda:99", model=StandInPatcher("cpu", "cpu"))


def test_devices_chosen_in_a_workflow_are_read_from_its_prompt():
    prompt = {
        "1": {"class_type": DeviceAssign.NODE_ID, "inputs": {"device": "cuda:1", "vae": ["2", 0]}},
        "2": {"class_type": DeviceAssign.NODE_ID, "inputs": {"device": "auto"}},
        "3": {"class_type": DeviceAssign.NODE_ID, "inputs": {"device": "cpu"}},
        "4": {"class_type": "KSampler", "inputs": {"device": "cuda:7"}},
    }
    assert devices.NODE_ID == DeviceAssign.NODE_ID
    assert devices.assigned_devices(prompt) == ["cuda:1", "cpu"]
