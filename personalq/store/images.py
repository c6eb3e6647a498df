"""Preview images and header thumbnails: fully decoded within limits, then re-encoded clean.

`Image.verify()` does not decode pixels, so a truncated or hostile file passes it. Here every image
is opened with only the PNG, JPEG and WebP decoders, refused above `MAX_PREVIEW_PIXELS` before any
pixel is decoded (a decompression bomb is one line, not an allocation), decoded whole, and written
back out by Pillow with no metadata (no EXIF, ICC, text chunks). The format stored is the one Pillow
decoded, so the file's suffix never comes from a name or a MIME type someone wrote.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from pathlib import Path

from personalq.store.errors import ImageRefused
from personalq.store.paths import ImageFormat

MAX_PREVIEW_PIXELS = 4096 * 4096
MAX_PREVIEW_BYTES = 32 * 1024 * 1024
_DECODERS = {"PNG": ImageFormat.PNG, "JPEG": ImageFormat.JPEG, "WEBP": ImageFormat.WEBP}


@dataclass(frozen=True)
class CleanImage:
    """Re-encoded image bytes and the format they are in."""

    data: bytes
    format: ImageFormat
    size: tuple[int, int]


def clean_image(data: bytes, label: str) -> CleanImage:
    """Decode `data` as PNG, JPEG or WebP and re-encode it without metadata; `ImageRefused` otherwise."""
    from PIL import Image

    if len(data) > MAX_PREVIEW_BYTES:
        raise ImageRefused(f"{label}: {len(data):,} bytes is over the {MAX_PREVIEW_BYTES // 2**20} MiB preview limit")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=list(_DECODERS)) as image:
                width, height = image.size
                if width * height > MAX_PREVIEW_PIXELS:
                    raise ImageRefused(
                        f"{label}: {width}x{height} pixels is over the {MAX_PREVIEW_PIXELS:,}-pixel preview limit"
                    )
                image_format = _DECODERS[image.format]
                image.seek(0)
                image.load()
                pixels = image.convert("RGBA" if image.mode in ("RGBA", "LA", "P", "PA") else "RGB")
    except ImageRefused:
        raise
    except Exception as error:  # Pillow raises OSError, SyntaxError, ValueError, struct.error, bomb errors...
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ImageRefused(f"{label}: unreadable image, not a decodable PNG, JPEG or WebP ({reason})") from None
    if image_format is ImageFormat.JPEG and pixels.mode == "RGBA":
        pixels = pixels.convert("RGB")
    out = io.BytesIO()
    pixels.save(out, format=image_format.name, **({"quality": 95} if image_format is not ImageFormat.PNG else {}))
    return CleanImage(out.getvalue(), image_format, (width, height))


def clean_image_file(path: Path) -> CleanImage:
    """`clean_image` of a file, with its name as the label; a missing or oversize file is refused."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_PREVIEW_BYTES:
            raise ImageRefused(f"preview {path.name}: {size:,} bytes is over the {MAX_PREVIEW_BYTES // 2**20} MiB preview limit")
        data = path.read_bytes()
    except FileNotFoundError:
        raise ImageRefused(f"preview {path}: no such file") from None
    except OSError as error:
        raise ImageRefused(f"preview {path.name}: cannot read ({error.strerror or error})") from None
    return clean_image(data, f"preview {path.name}")
