"""tools/tiny_models.py: what ComfyUI's SD 1.x detection reads, seeded bytes, files written once."""

import hashlib

from comfyui_courier.tools import tiny_models
from comfyui_courier.tools.tiny_models import CHECKPOINT, LORA, SECOND_CHECKPOINT, write_tiny_models


def test_the_unet_has_what_comfyui_detects_as_sd15():
    unet = tiny_models.unet_shapes()
    key = "model.diffusion_model."
    assert unet[key + "input_blocks.0.0.weight"] == (320, 4, 3, 3)  # model_channels 320, 4 latent channels
    assert unet[key + "input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight"] == (320, 768)  # context_dim
    assert len(unet[key + "input_blocks.1.1.proj_in.weight"]) == 4  # a conv proj_in: not a linear transformer
    assert not [k for k in unet if "label_emb" in k or "middle_block" in k or "time_stack" in k]
    assert len(tiny_models.clip_shapes()) == 2 + 12 * 16 + 2  # all of CLIP-L's weights


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_files_are_written_once_seeded_and_a_broken_one_again(tmp_path):
    assert write_tiny_models(tmp_path) == {tmp_path / CHECKPOINT: True, tmp_path / LORA: True}
    first = {path: digest(path) for path in (tmp_path / CHECKPOINT, tmp_path / LORA)}
    stamps = {path: path.stat().st_mtime_ns for path in first}
    assert write_tiny_models(tmp_path) == {tmp_path / CHECKPOINT: False, tmp_path / LORA: False}
    assert {path: path.stat().st_mtime_ns for path in first} == stamps
    lora = tmp_path / LORA
    lora.write_bytes(lora.read_bytes()[:-10])  # an interrupted copy
    assert write_tiny_models(tmp_path) == {tmp_path / CHECKPOINT: False, lora: True}
    assert digest(lora) == first[lora]  # the same bytes again
    assert not list(tmp_path.rglob("*.partial"))


def test_the_files_are_readable_by_a_comfyui_running_as_another_user(tmp_path):
    """safetensors creates its files 0600; ComfyUI may run as another user (a service account)."""
    for path in write_tiny_models(tmp_path):
        assert path.stat().st_mode & 0o777 == 0o644, (path, oct(path.stat().st_mode))


def test_a_second_checkpoint_has_its_own_name_and_weights(tmp_path):
    """Two models to place (issue 31): another file name and another seed, so different tensors."""
    from safetensors import safe_open

    written = write_tiny_models(tmp_path, second=True)
    assert written == {tmp_path / CHECKPOINT: True, tmp_path / LORA: True, tmp_path / SECOND_CHECKPOINT: True}
    assert SECOND_CHECKPOINT.parent == CHECKPOINT.parent and SECOND_CHECKPOINT.name != CHECKPOINT.name
    key = "model.diffusion_model.input_blocks.0.0.weight"
    with safe_open(tmp_path / CHECKPOINT, "pt") as first, safe_open(tmp_path / SECOND_CHECKPOINT, "pt") as second:
        assert set(first.keys()) == set(second.keys())
        assert not first.get_tensor(key).equal(second.get_tensor(key))
    assert write_tiny_models(tmp_path, second=True)[tmp_path / SECOND_CHECKPOINT] is False  # kept
    assert tmp_path / SECOND_CHECKPOINT not in write_tiny_models(tmp_path)  # only when asked
