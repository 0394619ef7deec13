"""Images for the model: PNG, JPEG, GIF and WebP files, resized to fit 2000×2000 with Pillow.

Both ways an image reaches the model go through :func:`prepare_image`: the ``read`` tool on an
image file (the result carries an image block) and an image path pasted or ``@``-mentioned in
the editor (attached to the prompt). An image larger than :data:`MAX_DIMENSION` on either side
is scaled down, keeping its aspect ratio, and re-encoded in its own format (a GIF becomes a PNG
of its first frame); one that is still over :data:`MAX_ENCODED_BYTES` is re-encoded as JPEG
at falling quality. The block is the harness's image content: ``{"type": "image", "data":
BASE64, "mimeType": ...}``, which each provider adapter sends in its native format.

A file that is not one of the four formats, is larger than :data:`MAX_FILE_BYTES`, or that
Pillow cannot decode raises :class:`ImageError` with a message naming it.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import msgspec

__all__ = [
    "IMAGE_SUFFIXES",
    "MAX_DIMENSION",
    "MAX_ENCODED_BYTES",
    "MAX_FILE_BYTES",
    "ImageError",
    "PreparedImage",
    "detect_image_type",
    "prepare_image",
    "prepare_image_file",
]

MAX_DIMENSION = 2000
MAX_ENCODED_BYTES = 4_500_000
"""Largest encoded image sent (providers refuse images around 5 MB)."""
MAX_FILE_BYTES = 50 * 1024 * 1024
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})

_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}


class ImageError(ValueError):
    """An image that cannot be given to the model (unknown format, too large, undecodable)."""


def detect_image_type(head: bytes) -> str | None:
    """The MIME type of PNG, JPEG, GIF or WebP data from its first bytes, else ``None``."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


class PreparedImage(msgspec.Struct, frozen=True):
    """An image ready for a request: base64 ``data`` in ``mime_type``, its size, and the size
    of the original when it was scaled down."""

    data: str
    mime_type: str
    width: int
    height: int
    original_width: int
    original_height: int

    @property
    def resized(self) -> bool:
        return (self.width, self.height) != (self.original_width, self.original_height)

    def block(self) -> dict[str, Any]:
        """The harness image block (``ImageContent``'s JSON)."""
        return {"type": "image", "data": self.data, "mimeType": self.mime_type}

    def note(self) -> str:
        """One line saying what the image is (for the model: coordinates on a resized image)."""
        text = f"[{self.mime_type}, {self.width}x{self.height}"
        if self.resized:
            scale = self.original_width / self.width
            text += (
                f", scaled down from {self.original_width}x{self.original_height}; "
                f"multiply coordinates by {scale:.2f} to map to the original"
            )
        return text + "]"


def _encode(image: Any, form: str, quality: int = 90) -> bytes:
    out = io.BytesIO()
    if form == "JPEG":
        if image.mode not in ("RGB", "L"):
            image = image.convert("RGB")
        image.save(out, "JPEG", quality=quality, optimize=True)
    else:
        image.save(out, form)
    return out.getvalue()


def prepare_image(data: bytes, name: str = "image") -> PreparedImage:
    """``data`` (an image file's bytes) as a :class:`PreparedImage`; ``name`` is used in
    errors. Raises :class:`ImageError`."""
    from PIL import Image, UnidentifiedImageError

    mime = detect_image_type(data[:16])
    if mime is None:
        raise ImageError(f"{name} is not a PNG, JPEG, GIF or WebP image")
    if len(data) > MAX_FILE_BYTES:
        raise ImageError(
            f"{name} is too large to attach ({len(data) // (1024 * 1024)} MB; "
            f"the limit is {MAX_FILE_BYTES // (1024 * 1024)} MB)"
        )
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            width, height = image.size
            if (
                width <= MAX_DIMENSION
                and height <= MAX_DIMENSION
                and len(data) <= MAX_ENCODED_BYTES
            ):
                encoded, out_mime, size = data, mime, (width, height)
            else:
                form = _FORMATS[mime]
                frame = image.convert("RGBA") if form == "GIF" else image.copy()
                if form == "GIF":
                    form, mime = "PNG", "image/png"
                frame.thumbnail((MAX_DIMENSION, MAX_DIMENSION), Image.Resampling.LANCZOS)
                encoded, out_mime = _encode(frame, form), mime
                for quality in (85, 70, 55, 40):
                    if len(encoded) <= MAX_ENCODED_BYTES:
                        break
                    encoded, out_mime = _encode(frame, "JPEG", quality), "image/jpeg"
                size = frame.size
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as error:
        raise ImageError(f"{name} could not be decoded as an image: {error}") from None
    if len(encoded) > MAX_ENCODED_BYTES:
        raise ImageError(f"{name} is still over {MAX_ENCODED_BYTES} bytes after resizing")
    return PreparedImage(
        base64.b64encode(encoded).decode("ascii"), out_mime, size[0], size[1], width, height
    )


def prepare_image_file(path: Path) -> PreparedImage:
    """The image file at ``path`` (see :func:`prepare_image`); a file that cannot be read is an
    :class:`ImageError` too."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ImageError(f"{path} is too large to attach ({size // (1024 * 1024)} MB)")
        data = path.read_bytes()
    except OSError as error:
        raise ImageError(f"{path}: cannot read it: {error.strerror or error}") from None
    return prepare_image(data, str(path))
