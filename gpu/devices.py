"""Which devices a workflow may choose, and placing models on one by cloning their patchers.

ComfyUI decides where a model runs from its ModelPatcher's ``load_device``
(weights go there to compute) and ``offload_device`` (where they rest). A clone
shares the weights but has its own devices, so changing a clone places the
model for this workflow only: the loader's cached object, the other workflows
and ``comfy.model_management``'s globals stay as they were.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

AUTO = "auto"
NODE_ID = "CourierDeviceAssign"  # the node's id, for reading API prompts


class DeviceUnavailable(ValueError):
    """The chosen device does not exist on this machine; the message lists those that do."""


@dataclass(frozen=True)
class Accelerators:
    """What torch sees on this machine."""

    cuda_count: int = 0
    mps: bool = False

    @classmethod
    def detect(cls) -> Accelerators:
        import torch

        mps = getattr(torch.backends, "mps", None)
        return cls(cuda_count=torch.cuda.device_count() if torch.cuda.is_available() else 0,
                   mps=bool(mps and mps.is_available()))


def device_choices(found: Accelerators) -> list[str]:
    """The node's choice list: ``auto``, ``cpu``, ``cuda:0`` … ``cuda:N-1``, ``mps`` when present."""
    choices = [AUTO, "cpu"] + [f"cuda:{i}" for i in range(found.cuda_count)]
    return choices + (["mps"] if found.mps else [])


def check_device(choice: str, found: Accelerators) -> None:
    """Raise ``DeviceUnavailable`` with a readable reason unless ``choice`` exists here."""
    if choice in device_choices(found):
        return
    if choice.startswith("cuda"):
        have = found.cuda_count
        if have == 0:
            reason = "this machine has no CUDA device"
        else:
            listed = ", ".join(f"cuda:{i}" for i in range(have))
            reason = f"this machine has {have} CUDA device{'s' if have > 1 else ''} ({listed})"
    elif choice == "mps":
        reason = "Apple's MPS backend is not available on this machine"
    else:
        reason = "choose one of " + ", ".join(device_choices(found))
    raise DeviceUnavailable(f"{choice} is not available: {reason}")


def offload_for(patcher, device):
    """Where the clone's weights rest between uses.

    ComfyUI normally offloads to the CPU; with --highvram/--gpu-only a model rests
    on its compute device (offload == load). Keep that mode on the new device,
    so weights never rest on a GPU the workflow did not choose.
    """
    if patcher.offload_device == patcher.load_device:
        return device
    return patcher.offload_device


def place_model(patcher, device):
    """MODEL (a ModelPatcher) cloned to load on ``device``; the original is untouched."""
    clone = patcher.clone()
    clone.offload_device = offload_for(patcher, device)
    clone.load_device = device
    return clone


def place_clip(clip, device):
    """CLIP placed on ``device``: ``clip.clone()`` shares the text encoder, owns its patcher."""
    clone = clip.clone()
    clone.patcher = place_model(clip.patcher, device)
    return clone


def place_vae(vae, device):
    """VAE placed on ``device``.

    ComfyUI's VAE has no clone(); it computes on ``vae.device`` and loads through
    ``vae.patcher``. A shallow copy with both replaced leaves the original VAE as
    it was. The weights keep the dtype chosen for the original device.
    """
    clone = copy.copy(vae)
    clone.patcher = place_model(vae.patcher, device)
    clone.device = device
    return clone


def assigned_devices(prompt: dict) -> list[str]:
    """Devices the Device Assign nodes of an API prompt choose (``auto`` left out)."""
    chosen = (node.get("inputs", {}).get("device", AUTO) for node in prompt.values()
              if node.get("class_type") == NODE_ID)
    return [device for device in chosen if isinstance(device, str) and device != AUTO]
