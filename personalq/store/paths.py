"""Every path the store writes is built here, from validated parts only.

An id must match `ID_PATTERN` (a slug: no separators, no leading dot, no `..`); a preview's suffix
comes from the `ImageFormat` Pillow actually decoded, never from a file name or header metadata; and
the resolved result must lie inside the store's home. Nothing else in PersonalQ joins paths for the
store, so a crafted header or id cannot name `catalog.db` or a file outside the home.

A shared file place (`PERSONALQ_FILES_URL`) names files by content instead: `sha256/<2 hex>/<64 hex>.<suffix>`,
the hex being the SHA-256 of the bytes and the suffix `safetensors` or a decoded `ImageFormat`'s.
An address is checked against `BLOB_PATTERN` before anything is joined to it, so a catalog value
read back from a shared database cannot name a file outside the place either.
"""

from __future__ import annotations

import enum
import re
from pathlib import Path
from typing import Any

from personalq.atomic_write import TMP_PREFIX
from personalq.store.errors import UnsafePathError

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
CHECKPOINTS = "checkpoints"
PREVIEWS = "previews"
BLOBS = "sha256"
CHECKPOINT_SUFFIX = "safetensors"
HEX_PATTERN = re.compile(r"[0-9a-f]{64}")
BLOB_PATTERN = re.compile(rf"{BLOBS}/([0-9a-f]{{2}})/([0-9a-f]{{64}})\.(safetensors|png|jpg|webp)")


class ImageFormat(enum.Enum):
    """The image formats a preview may be stored as; the value is the suffix written."""

    PNG = "png"
    JPEG = "jpg"
    WEBP = "webp"


def check_id(value: Any) -> str:
    """Ids name files inside the store, so they are slugs: 1-128 letters, digits, '.', '_', '+', '-'."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value) or ".." in value:
        raise UnsafePathError(
            f"{value!r} is not a valid id: use 1-128 letters, digits, '.', '_', '+' or '-', starting with a letter or digit"
        )
    return value


def _inside(home: Path, relative: str) -> Path:
    root = home.resolve()
    path = (root / relative).resolve()
    if path == root or not path.is_relative_to(root):
        raise UnsafePathError(f"{relative!r} escapes the store ({root})")
    return path


def checkpoint_path(home: Path, checkpoint_id: str) -> Path:
    """`checkpoints/<id>.safetensors` under `home`."""
    return _inside(home, f"{CHECKPOINTS}/{check_id(checkpoint_id)}.safetensors")


def preview_dir(home: Path, checkpoint_id: str) -> Path:
    """`previews/<id>/` under `home`: one folder per checkpoint, removed with it."""
    return _inside(home, f"{PREVIEWS}/{check_id(checkpoint_id)}")


def preview_path(home: Path, checkpoint_id: str, index: int, image_format: ImageFormat) -> Path:
    """`previews/<id>/<n>.<png|jpg|webp>`; the suffix is the decoded format's, never the source's."""
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 1000:
        raise UnsafePathError(f"preview number {index!r} is out of range")
    if not isinstance(image_format, ImageFormat):
        raise UnsafePathError(f"{image_format!r} is not a preview format")
    return _inside(home, f"{PREVIEWS}/{check_id(checkpoint_id)}/{index}.{image_format.value}")


def relative(home: Path, path: Path) -> str:
    """A stored path as the catalog records it: relative to the home, so the store can move."""
    return path.resolve().relative_to(home.resolve()).as_posix()


def existing_inside(home: Path, value: Any, what: str, folder: str) -> Path:
    """A file a catalog entry names: a relative path to a file already inside `home/folder`
    (`checkpoints` or `previews`), so an entry cannot point at the catalog or the indexes."""
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise UnsafePathError(f"{what}: expected a path relative to the store, got {value!r}")
    root = home.resolve()
    path = (root / value).resolve()
    if not path.is_relative_to(root / folder):
        raise UnsafePathError(f"{what} {value!r} escapes the store ({root}); entries may only name files inside it")
    if not path.is_file():
        raise UnsafePathError(f"{what} {value!r} is not in the store; use `personalq repo add` to import weights")
    return path


def blob_address(sha256: str, suffix: str | ImageFormat) -> str:
    """`sha256/<first 2 hex>/<hex>.<suffix>`: where a shared place keeps bytes whose SHA-256 is `sha256`."""
    if not isinstance(sha256, str) or not HEX_PATTERN.fullmatch(sha256):
        raise UnsafePathError(f"{sha256!r} is not a SHA-256 hex digest")
    suffix = suffix.value if isinstance(suffix, ImageFormat) else suffix
    if suffix != CHECKPOINT_SUFFIX and suffix not in {f.value for f in ImageFormat}:
        raise UnsafePathError(f"{suffix!r} is not a stored file's suffix")
    return f"{BLOBS}/{sha256[:2]}/{sha256}.{suffix}"


def blob_digest(address: Any) -> str | None:
    """The SHA-256 an address names, or None when `address` is not a well-formed blob address."""
    if not isinstance(address, str):
        return None
    match = BLOB_PATTERN.fullmatch(address)
    return match.group(2) if match and match.group(2).startswith(match.group(1)) else None


def temporary_blob(address: Any) -> bool:
    """Whether `address` names a half-written `.tmp-*` file directly in a blob folder (`sha256/<xx>/`),
    the only other kind of file a repair may delete in a shared place."""
    parts = address.split("/") if isinstance(address, str) else []
    return (len(parts) == 3 and parts[0] == BLOBS and len(parts[1]) == 2 and parts[2].startswith(TMP_PREFIX)
            and ".." not in address and "\\" not in address)


def check_blob(address: Any, what: str, checkpoint: bool) -> str:
    """A catalog entry's blob address, well-formed and of the right kind (a checkpoint or an image)."""
    if blob_digest(address) is None or address.endswith(f".{CHECKPOINT_SUFFIX}") != checkpoint:
        kind = "a checkpoint" if checkpoint else "a preview"
        raise UnsafePathError(f"{what} {str(address)[:120]!r} is not {kind} address in the shared file place (sha256/xx/<hex>.<suffix>)")
    return address


def blob_path(root: Path, address: str) -> Path:
    """A checked blob address as a local path under `root` (the shared folder, or this node's copy of a remote place)."""
    if blob_digest(address) is None:
        raise UnsafePathError(f"{str(address)[:120]!r} is not a blob address")
    return _inside(root, address)
