"""Device Assign: run a MODEL, CLIP or VAE on a chosen device, for this workflow only."""

from __future__ import annotations

import torch
from comfy_api.v0_0_2 import io

from ..gpu import devices


class DeviceAssign(io.ComfyNode):
    NODE_ID = "CourierDeviceAssign"

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id=cls.NODE_ID,
            display_name="Device Assign (Courier)",
            category="Courier/GPU",
            description=("Places the connected MODEL, CLIP and VAE on one device for this workflow only, "
                         "by cloning their model patchers; ComfyUI's global settings and other workflows "
                         "are not touched. 'auto' leaves them where ComfyUI put them. The weights keep the "
                         "dtype chosen for their original device."),
            inputs=[  # names and order are fixed: saved editor graphs store widget values by position
                io.Combo.Input("device", options=devices.device_choices(devices.Accelerators.detect()),
                               default=devices.AUTO, tooltip="Where the connected models compute"),
                io.Model.Input("model", optional=True),
                io.Clip.Input("clip", optional=True),
                io.Vae.Input("vae", optional=True),
            ],
            outputs=[io.Model.Output(display_name="model"), io.Clip.Output(display_name="clip"),
                     io.Vae.Output(display_name="vae")],
        )

    @classmethod
    def validate_inputs(cls, device):
        # Taking over the check of `device` says what this machine has (a workflow made elsewhere);
        # ComfyUI checks no v3 combo's value against its options.
        try:
            devices.check_device(device, devices.Accelerators.detect())
        except devices.DeviceUnavailable as exc:
            return str(exc)
        return True

    @classmethod
    def execute(cls, device, model=None, clip=None, vae=None) -> io.NodeOutput:
        if device == devices.AUTO:
            return io.NodeOutput(model, clip, vae)
        devices.check_device(device, devices.Accelerators.detect())
        target = torch.device(device)
        return io.NodeOutput(
            devices.place_model(model, target) if model is not None else None,
            devices.place_clip(clip, target) if clip is not None else None,
            devices.place_vae(vae, target) if vae is not None else None,
        )
