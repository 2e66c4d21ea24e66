"""Image helpers shared by the nodes and the bot: plain Pillow/numpy, no ComfyUI.

ComfyUI's IMAGE is a float tensor [batch, height, width, 3] in 0..1 and MASK is
[batch, height, width]; conversion to torch happens in the nodes (torch comes
from ComfyUI), so everything here works on numpy arrays.
"""

from __future__ import annotations

import hashlib
import io
import math
import textwrap

import numpy as np
from PIL import Image, ImageDraw, ImageFont, ImageOps, UnidentifiedImageError

from . import i18n

MAX_PIXELS = 64_000_000
VIDEO_SUFFIXES = (".mp4", ".webm", ".mov", ".mkv")
ANIMATION_SUFFIXES = (".gif",)


def is_still(filename: str) -> bool:
    """Whether a result file is a still image by its name (not a video or a GIF): it may join an album."""
    return not filename.lower().endswith(VIDEO_SUFFIXES + ANIMATION_SUFFIXES)


class BadImage(ValueError):
    """The bytes are not an image we accept (corrupt, unknown format or too large).

    ``key`` and ``params`` name the reason for the message catalog; ``str()`` is the English text.
    """

    def __init__(self, key: str, **params):
        super().__init__(i18n.text("en", key, **params))
        self.key = key
        self.params = params


def too_big(size: int, limit: int) -> BadImage:
    """The refusal of a file of ``size`` bytes over ``limit`` (both in bytes; MB rounded up, so never equal)."""
    return BadImage("image_too_big", size_mb=math.ceil(size / 2**20 * 10) / 10, limit_mb=round(limit / 2**20, 1))


def too_many_pixels(width: int, height: int, max_pixels: int = MAX_PIXELS) -> BadImage | None:
    """The refusal of a ``width``×``height`` picture, or None when it is within ``max_pixels``."""
    if width * height <= max_pixels:
        return None
    return BadImage("image_too_many_pixels", width=width, height=height, limit_mp=round(max_pixels / 1e6, 1))


def decode_image(data: bytes, max_bytes: int) -> Image.Image:
    """Open user-supplied bytes as an image, refusing oversized or corrupt input.

    :raises BadImage: over ``max_bytes``, over ``MAX_PIXELS``, or not an image Pillow reads.
    """
    if len(data) > max_bytes:
        raise too_big(len(data), max_bytes)
    try:
        with Image.open(io.BytesIO(data)) as probe:
            if refusal := too_many_pixels(probe.width, probe.height):
                raise refusal
            probe.verify()
        image = Image.open(io.BytesIO(data))
        image.load()
    except BadImage:
        raise
    except Image.DecompressionBombError:  # so large that Pillow will not even open it
        size = _header_size(data)
        raise (too_many_pixels(*size) if size else BadImage("image_unreadable")) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise BadImage("image_unreadable") from None
    return ImageOps.exif_transpose(image)


def _header_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the header, as ``Image.open`` reads it before its decompression-bomb refusal."""
    Image.init()
    for factory, accept in Image.OPEN.values():
        accepted = accept(data[:16]) if accept else True
        if accepted and not isinstance(accepted, str):
            try:
                with factory(io.BytesIO(data), "") as probe:
                    return probe.size
            except Exception:  # noqa: BLE001 - any plugin that cannot parse it is not its format
                continue
    return None


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
