"""Tiny random-weight SD 1.x checkpoint and LoRA that ComfyUI's own loaders accept unchanged.

    python <pack> tiny-models --dest <ComfyUI models folder> [--second-checkpoint]

They let tests and ``try`` run the real path (CheckpointLoaderSimple, KSampler,
VAEDecode, LoraLoader) without downloading weights; the pictures are noise.
What ComfyUI 0.3.64 needs (``comfy/model_detection.py``, ``supported_models.SD15``,
``comfy/sd.py``): a UNet with ``model_channels`` 320, ``context_dim`` 768, a conv
``proj_in`` and no ``label_emb`` is SD15, however few blocks it has (here one
level: one res block and one transformer, no middle block); the CLIP is always
the full CLIP-L of ``sd1_clip_config.json`` (weights it does not find stay
uninitialised, so every one is written); the VAE may be TAESD-shaped.

``--second-checkpoint`` adds another checkpoint, the same shapes from another seed under another
name: ComfyUI loads it as a different model, so tests and benchmarks have two models to place.

Seeded, so the same bytes every time; a file is written under a temporary name
and renamed (mode 0644), and one that is complete and of this format is left alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

CHECKPOINT = Path("checkpoints") / "tiny-sd15.safetensors"
SECOND_CHECKPOINT = Path("checkpoints") / "second-tiny-sd15.safetensors"  # "--model tiny" still means the first
LORA = Path("loras") / "tiny-lora-sd15.safetensors"
FORMAT = "courier-tiny-sd15/1"  # in each file's metadata: change it when the tensors change
SEED = 20260
SECOND_SEED = 20261
STD = 0.02  # the UNet, CLIP and LoRA; the VAE's are 1/sqrt(fan-in), so its picture is not flat grey
LORA_RANK = 4
FILE_MODE = 0o644
"""Readable by a ComfyUI that runs as another user (a service account), as a downloaded model is."""

_CH, _CONTEXT, _TIME = 320, 768, 1280
_UNET = "model.diffusion_model."
_CLIP = "cond_stage_model.transformer.text_model."
_VAE = "first_stage_model."
_CLIP_LAYERS, _CLIP_WIDTH, _CLIP_MLP, _VOCAB, _POSITIONS = 12, 768, 3072, 49408, 77


def _pair(prefix: str, out: int, *inputs: int, bias: bool = True) -> dict[str, tuple]:
    shapes = {f"{prefix}.weight": (out, *inputs)}
    return shapes | ({f"{prefix}.bias": (out,)} if bias else {})


def _res_block(prefix: str, cin: int, cout: int) -> dict[str, tuple]:
    shapes = (_pair(prefix + "in_layers.0", cin) | _pair(prefix + "in_layers.2", cout, cin, 3, 3)
              | _pair(prefix + "emb_layers.1", cout, _TIME) | _pair(prefix + "out_layers.0", cout)
              | _pair(prefix + "out_layers.3", cout, cout, 3, 3))
    return shapes | (_pair(prefix + "skip_connection", cout, cin, 1, 1) if cin != cout else {})


def _attention(prefix: str, context: int) -> dict[str, tuple]:
    return (_pair(prefix + "to_q", _CH, _CH, bias=False) | _pair(prefix + "to_k", _CH, context, bias=False)
            | _pair(prefix + "to_v", _CH, context, bias=False) | _pair(prefix + "to_out.0", _CH, _CH))


def _transformer(prefix: str) -> dict[str, tuple]:
    block = prefix + "transformer_blocks.0."
    return (_pair(prefix + "norm", _CH) | _pair(prefix + "proj_in", _CH, _CH, 1, 1)
            | _attention(block + "attn1.", _CH) | _attention(block + "attn2.", _CONTEXT)
            | _pair(block + "ff.net.0.proj", 8 * _CH, _CH) | _pair(block + "ff.net.2", _CH, 4 * _CH)
            | _pair(block + "norm1", _CH) | _pair(block + "norm2", _CH) | _pair(block + "norm3", _CH)
            | _pair(prefix + "proj_out", _CH, _CH, 1, 1))


def unet_shapes() -> dict[str, tuple]:
    shapes = (_pair("time_embed.0", _TIME, _CH) | _pair("time_embed.2", _TIME, _TIME)
              | _pair("input_blocks.0.0", _CH, 4, 3, 3)
              | _res_block("input_blocks.1.0.", _CH, _CH) | _transformer("input_blocks.1.1."))
    for index in (0, 1):  # each output block takes its skip: twice the channels in
        shapes |= _res_block(f"output_blocks.{index}.0.", 2 * _CH, _CH) | _transformer(f"output_blocks.{index}.1.")
    shapes |= _pair("out.0", _CH) | _pair("out.2", 4, _CH, 3, 3)
    return {_UNET + key: shape for key, shape in shapes.items()}


def clip_shapes() -> dict[str, tuple]:
    width = _CLIP_WIDTH
    shapes = {"embeddings.token_embedding.weight": (_VOCAB, width),
              "embeddings.position_embedding.weight": (_POSITIONS, width)}
    for layer in range(_CLIP_LAYERS):
        prefix = f"encoder.layers.{layer}."
        shapes |= _pair(prefix + "layer_norm1", width) | _pair(prefix + "layer_norm2", width)
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes |= _pair(f"{prefix}self_attn.{proj}", width, width)
        shapes |= _pair(prefix + "mlp.fc1", _CLIP_MLP, width) | _pair(prefix + "mlp.fc2", width, _CLIP_MLP)
    shapes |= _pair("final_layer_norm", width)
    return {_CLIP + key: shape for key, shape in shapes.items()}


def _taesd_block(prefix: str) -> dict[str, tuple]:
    return {key: shape for conv in (0, 2, 4) for key, shape in _pair(f"{prefix}.conv.{conv}", 64, 64, 3, 3).items()}


def vae_shapes() -> dict[str, tuple]:
    """``comfy/taesd/taesd.py``'s layers: encoder and decoder are Sequentials of convs and blocks."""
    encoder = _pair("taesd_encoder.0", 64, 3, 3, 3) | _pair("taesd_encoder.14", 4, 64, 3, 3)
    for index in range(1, 14):
        encoder |= (_pair(f"taesd_encoder.{index}", 64, 64, 3, 3, bias=False) if index in (2, 6, 10)
                    else _taesd_block(f"taesd_encoder.{index}"))
    decoder = _pair("taesd_decoder.1", 64, 4, 3, 3) | _pair("taesd_decoder.19", 3, 64, 3, 3)
    for index in (3, 4, 5, 8, 9, 10, 13, 14, 15, 18):
        decoder |= _taesd_block(f"taesd_decoder.{index}")
    for index in (7, 12, 17):  # after each Upsample
        decoder |= _pair(f"taesd_decoder.{index}", 64, 64, 3, 3, bias=False)
    return {_VAE + key: shape for key, shape in (encoder | decoder | {"vae_scale": (), "vae_shift": ()}).items()}


def checkpoint_shapes() -> dict[str, tuple]:
    return unet_shapes() | clip_shapes() | vae_shapes()


def lora_shapes() -> dict[str, tuple]:
    """Rank-4 LoRA (kohya names) on every attention projection of the UNet and the CLIP."""
    shapes: dict[str, tuple] = {}

    def add(name: str, out: int, inp: int) -> None:
        shapes[f"{name}.lora_down.weight"] = (LORA_RANK, inp)
        shapes[f"{name}.lora_up.weight"] = (out, LORA_RANK)
        shapes[f"{name}.alpha"] = ()

    for key, shape in unet_shapes().items():
        if ".attn" in key and key.endswith(".weight"):
            add("lora_unet_" + key[len(_UNET):-len(".weight")].replace(".", "_"), *shape)
    for layer in range(_CLIP_LAYERS):
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            add(f"lora_te_text_model_encoder_layers_{layer}_self_attn_{proj}", _CLIP_WIDTH, _CLIP_WIDTH)
    return shapes


def _tensors(shapes: dict[str, tuple], scalars: dict[str, float], seed: int) -> dict:
    """Seeded fp16 tensors: matrices and kernels normal (see STD), norm scales 1, biases 0."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for key in sorted(shapes):
        shape, name = shapes[key], key.rsplit(".", 1)[-1]
        if name in scalars:
            tensor = torch.tensor(scalars[name])
        elif len(shape) >= 2:
            fan_in = math.prod(shape[1:])
            tensor = torch.randn(shape, generator=generator) * (fan_in ** -0.5 if key.startswith(_VAE) else STD)
        elif key.endswith(".weight"):
            tensor = torch.ones(shape)
        else:
            tensor = torch.zeros(shape)
        tensors[key] = tensor.to(torch.float16).contiguous()
    return tensors


def _complete(path: Path, shapes: dict[str, tuple]) -> bool:
    """Whether ``path`` is a whole file of this format with exactly these tensors."""
    try:
        with open(path, "rb") as file:
            header_size = int.from_bytes(file.read(8), "little")
            header = json.loads(file.read(header_size))
    except (OSError, ValueError):
        return False
    metadata = header.pop("__metadata__", {})
    expected = {key: list(shape) for key, shape in shapes.items()}
    return (metadata.get("format_courier") == FORMAT
            and {key: entry["shape"] for key, entry in header.items()} == expected
            and path.stat().st_size == 8 + header_size + max(entry["data_offsets"][1] for entry in header.values()))


def _write(path: Path, shapes: dict[str, tuple], scalars: dict[str, float], seed: int = SEED) -> bool:
    """Write one file unless it is already complete; whether it was written."""
    if _complete(path, shapes):
        return False
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        save_file(_tensors(shapes, scalars, seed), str(partial), metadata={"format_courier": FORMAT})
        partial.chmod(FILE_MODE)  # safetensors creates it 0600
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return True


def write_tiny_models(dest: Path, *, second: bool = False) -> dict[Path, bool]:
    """Write the checkpoint and the LoRA under ``dest`` (a ComfyUI models folder), and the second
    checkpoint if ``second``; path → written now."""
    dest = Path(dest)
    vae = {"vae_scale": 1.0, "vae_shift": 0.0}
    written = {
        dest / CHECKPOINT: _write(dest / CHECKPOINT, checkpoint_shapes(), vae),
        dest / LORA: _write(dest / LORA, lora_shapes(), {"alpha": float(LORA_RANK)}),
    }
    if second:
        written[dest / SECOND_CHECKPOINT] = _write(dest / SECOND_CHECKPOINT, checkpoint_shapes(), vae, SECOND_SEED)
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python <pack> tiny-models", description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, required=True,
                        help="a ComfyUI models folder (files go to its checkpoints/ and loras/)")
    parser.add_argument("--second-checkpoint", action="store_true",
                        help=f"also {SECOND_CHECKPOINT.name}: another seed, a different model to ComfyUI")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    for path, written in write_tiny_models(args.dest, second=args.second_checkpoint).items():
        size = path.stat().st_size / 1e6
        print(f"{'wrote' if written else 'kept'} {path} ({size:.1f} MB)")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0
