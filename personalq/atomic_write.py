"""The one way PersonalQ writes a file that readers (or a crash) must see whole or not at all."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path

TMP_PREFIX = ".tmp-"


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(dest: Path, chunks: Iterable[bytes] | bytes) -> Path:
    """Write under a temporary name beside `dest`, fsync, then rename over it."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}-{dest.name}"
    if isinstance(chunks, (bytes, bytearray)):
        chunks = [bytes(chunks)]
    try:
        with tmp.open("wb") as out:
            for chunk in chunks:
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(dest.parent)
    return dest


def file_chunks(path: Path, size: int = 1 << 20) -> Iterable[bytes]:
    with Path(path).open("rb") as handle:
        yield from iter(lambda: handle.read(size), b"")
