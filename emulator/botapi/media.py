"""What Telegram's servers learn from media bytes: photo sizes, video dimensions, MIME types.

A photo is recompressed to JPEG in the sizes Telegram makes (boxes of 90, 320,
800 and 1280 pixels), so the bytes a bot downloads from a photo are not the
bytes it uploaded, exactly as in production; documents keep their bytes.
"""

from __future__ import annotations

import io
import mimetypes
import struct
from collections.abc import Iterator

from PIL import Image, ImageSequence, UnidentifiedImageError

from .wire import bad_request

MAX_PHOTO = 10 * 1024 * 1024
PHOTO_BOXES = (90, 320, 800, 1280)


def photo_sizes(data: bytes) -> list[tuple[int, int, bytes]]:
    """(width, height, JPEG bytes) per size, smallest first; the largest is the photo capped at 1280."""
    if len(data) > MAX_PHOTO:
        raise bad_request(f"file of size {len(data)} bytes is too big for a photo; "
                          f"the maximum size is {MAX_PHOTO} bytes")
    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.load()
            image = opened.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError):
        raise bad_request("IMAGE_PROCESS_FAILED") from None
    width, height = image.size
    if width + height > 10000 or max(width, height) > 20 * min(width, height):
        raise bad_request("PHOTO_INVALID_DIMENSIONS")
    sizes = []
    for box in PHOTO_BOXES:
        scale = min(1.0, box / max(width, height))
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        if sizes and size == sizes[-1][:2]:
            break
        buffer = io.BytesIO()
        image.resize(size, Image.LANCZOS).save(buffer, "JPEG", quality=87)
        sizes.append((*size, buffer.getvalue()))
    return sizes


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a still image, as Telegram reads a sticker's."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except (UnidentifiedImageError, OSError, ValueError):
        raise bad_request("IMAGE_PROCESS_FAILED") from None


def video_info(data: bytes) -> tuple[int, int, int]:
    """(width, height, duration in seconds) of an MP4/MOV or an animated image; zeros when unknown."""
    if data[4:8] == b"ftyp":
        return _mp4_info(data)
    try:
        with Image.open(io.BytesIO(data)) as image:
            duration_ms = sum(frame.info.get("duration", 0) for frame in ImageSequence.Iterator(image))
            return image.width, image.height, round(duration_ms / 1000)
    except (UnidentifiedImageError, OSError, ValueError):
        return 0, 0, 0


def _boxes(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """ISO BMFF boxes in data[start:end] as (type, content start, content end)."""
    while start + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, start)
        header = 8
        if size == 1 and start + 16 <= end:
            size, header = struct.unpack_from(">Q", data, start + 8)[0], 16
        elif size == 0:
            size = end - start
        if size < header:
            return
        yield kind, start + header, min(start + size, end)
        start += size


def _mp4_info(data: bytes) -> tuple[int, int, int]:
    width = height = duration = 0
    for kind, start, end in _boxes(data, 0, len(data)):
        if kind != b"moov":
            continue
        for inner, s, e in _boxes(data, start, end):
            if inner == b"mvhd" and e - s >= 32:
                if data[s] == 1:
                    timescale, length = struct.unpack_from(">IQ", data, s + 20)
                else:
                    timescale, length = struct.unpack_from(">II", data, s + 12)
                duration = round(length / timescale) if timescale else 0
            elif inner == b"trak" and not width:
                for box, bs, be in _boxes(data, s, e):
                    if box == b"tkhd" and be - bs >= 8:
                        w, h = struct.unpack_from(">II", data, be - 8)
                        width, height = w >> 16, h >> 16
    return width, height, duration


def mime_type(filename: str, declared: str | None) -> str:
    """Telegram goes by the file name's extension first, then by what the client declared."""
    return mimetypes.guess_type(filename, strict=False)[0] or declared or "application/octet-stream"


def extension(filename: str, mime: str) -> str:
    suffix = filename.rpartition(".")[2] if "." in filename else ""
    return suffix.lower() or (mimetypes.guess_extension(mime, strict=False) or ".bin").lstrip(".")
