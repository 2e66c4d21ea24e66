"""Device Assign: run a MODEL, CLIP or VAE on a chosen device, for this workflow only."""

from __future__ import annotations

from ..gpu import devices


class DeviceAssign:
    NODE_ID = "CourierDeviceAssign"
    DISPLAY_NAME = "Device Assign (Courier)"
    CATEGORY = "Courier/GPU"
    DESCRIPTION = ("Places the connected MODEL, CLIP and VAE on one device for this workflow only, "
                   "by cloning their model patchers; ComfyUI's global settings and other workflows "
                   "are not touched. 'auto' leaves them where ComfyUI put them. The weights keep the "
                   "dtype chosen for their original device.")
    RETURN_TYPES = ("MODEL", "CLIP", "VAE")
    RETURN_NAMES = ("model", "clip", "vae")
    FUNCTION = "assign"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "device": (devices.device_choices(devices.Accelerators.detect()),
                           {"default": devices.AUTO, "tooltip": "Where the connected models compute"}),
            },
            "optional": {
                "model": ("MODEL",),
                "clip": ("CLIP",),
                "vae": ("VAE",),
            },
        }

    @classmethod
    def VALIDATE_INPUTS(cls, device):
        # Taking over the check of `device` replaces ComfyUI's "Value not in list"
        # with a message that says what this machine has (a workflow made elsewhere).
        try:
            devices.check_device(device, devices.Accelerators.detect())
        except devices.DeviceUnavailable as exc:
            return str(exc)
        return True

    def assign(self, device, model=None, clip=None, vae=None):
        if device == devices.AUTO:
            return (model, clip, vae)
        import torch

        devices.check_device(device, devices.Accelerators.detect())
        target = torch.device(device)
        return (
            devices.place_model(model, target) if model is not None else None,
            devices.place_clip(clip, target) if clip is not None else None,
            devices.place_vae(vae, target) if vae is not None else None,
        )
