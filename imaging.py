"""Image helpers shared by the nodes and the bot: plain Pillow/numpy, no ComfyUI.

ComfyUI's IMAGE is a float tensor [batch, height, width, 3] in 0..1 and MASK is
[batch, height, width]; conversion to torch happens in the nodes (torch comes
from ComfyUI), so everything here works on numpy arrays.
"""

from __future__ import annotations

import hashlib
import io
import textwrap

import numpy as np
from PIL import Image, ImageDraw, ImageFont, ImageOps, UnidentifiedImageError

MAX_PIXELS = 64 * 1024 * 1024


class BadImage(ValueError):
    """The bytes are not an image we accept (corrupt, unknown format or too large)."""


def decode_image(data: bytes, max_bytes: int) -> Image.Image:
    """Open user-supplied bytes as an image, refusing oversized or corrupt input."""
    if len(data) > max_bytes:
        raise BadImage(f"image is {len(data) / 2**20:.1f} MB, the limit is {max_bytes / 2**20:.0f} MB")
    try:
        with Image.open(io.BytesIO(data)) as probe:
            if probe.width * probe.height > MAX_PIXELS:
                raise BadImage(f"image is {probe.width}x{probe.height} pixels, too large")
            probe.verify()
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError, Image.DecompressionBombError) as exc:
        raise BadImage(f"not a readable image ({exc.__class__.__name__})") from None
    return ImageOps.exif_transpose(image)


def image_to_arrays(image: Image.Image) -> tuple[np.ndarray, np.ndarray]:
    """(rgb [H,W,3] float32 0..1, mask [H,W] float32) as ComfyUI's LoadImage makes them."""
    rgb = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    if "A" in image.getbands():
        mask = 1.0 - np.asarray(image.getchannel("A"), dtype=np.float32) / 255.0
    else:
        mask = np.zeros(rgb.shape[:2], dtype=np.float32)
    return rgb, mask


def array_to_image(rgb: np.ndarray) -> Image.Image:
    """A [H,W,3] float array in 0..1 as an 8-bit RGB image."""
    return Image.fromarray(np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8))


def encode_png(image: Image.Image, metadata: dict[str, str] | None = None) -> bytes:
    """Lossless PNG; only the given text chunks are written (no workflow leaks by default)."""
    from PIL.PngImagePlugin import PngInfo

    info = None
    if metadata:
        info = PngInfo()
        for key, value in metadata.items():
            info.add_text(key, value)
    out = io.BytesIO()
    image.save(out, format="PNG", pnginfo=info, compress_level=4)
    return out.getvalue()


def text_card(text: str, width: int, height: int, seed: int) -> Image.Image:
    """A placeholder image showing the prompt on a gradient picked by the seed.

    Telegram Input outputs this when no image was given, so weight-free
    workflows (and the editor's preview) still have a meaningful picture.
    """
    digest = hashlib.sha256(f"{seed}".encode()).digest()
    top = np.frombuffer(digest[0:3], dtype=np.uint8).astype(np.float32)
    bottom = np.frombuffer(digest[3:6], dtype=np.uint8).astype(np.float32)
    ramp = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    pixels = (top * (1 - ramp) + bottom * ramp).repeat(width, axis=1)
    image = Image.fromarray(pixels.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=max(12, min(width, height) // 16))
    lines = textwrap.wrap(text or "", width=max(8, width // max(8, font.size // 2 + 1)))[:8]
    draw.multiline_text((width // 2, height // 2), "\n".join(lines), font=font, fill="white",
                        anchor="mm", align="center", stroke_width=2, stroke_fill="black")
    return image
