"""Checkpoint files and previews in a place every node shares (`PERSONALQ_FILES_URL`), addressed by content.

Each file is kept once, as `sha256/<2 hex>/<hex>.<suffix>` (`paths.blob_address`), so two nodes
writing the same bytes write the same name, identical previews of different checkpoints are stored
once, and a copy fetched to a node can never be stale. Rows record the address; no node's home
appears in the catalog, so a node with its own home keeps every other node's rows.

Two kinds of place, because only one of them can hold a lock:

- a folder (a path, or a `file://` URL; on several machines, a shared mount): the write lock lives in
  the folder itself, so every node's adds, removals and repairs take turns on it exactly as the
  writers of one home do. A repair can then take any file without a row for an orphan and delete it
  at once, and an add finding its bytes already there keeps them (nobody can delete them meanwhile).
- any other fsspec URL (`s3://`, `gs://`, `memory://`...): there is no lock all nodes can take, so
  nothing is deleted before it is `ORPHAN_GRACE_S` old. An add always (re)writes its files, so a
  file another node is adding right now is young; a file without a row that is older than the grace
  period belongs to nobody. A renderer reads a local copy under the node's home (`files-cache/`,
  same addresses), fetched once and checked against its hash.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Collection, Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from personalq.atomic_write import TMP_PREFIX, atomic_write, file_chunks
from personalq.store import paths
from personalq.store.consistency import ConsistencyReport, compare
from personalq.store.errors import StoreError, UnsafePathError
from personalq.store.files import WRITE_LOCK_NAME, FilePlace, HomeFiles
from personalq.store.intake import Prepared

ORPHAN_GRACE_S = 3600.0
"""On a place without a shared lock, files without a row younger than this may be another node's add in progress."""
CACHE = "files-cache"
"""A node's local copies of a remote place's files, under its home."""


class SharedFiles:
    """Blobs in an fsspec filesystem under `root`; read through local copies under `local_root`."""

    def __init__(self, fs: Any, root: str, local_root: Path, lock_path: Path, grace_s: float):
        self.fs, self.root = fs, root.rstrip("/")
        self.local_root, self.lock_path, self.grace_s = local_root, lock_path, grace_s

    # ---- writing

    def write(self, item: Prepared, created: list[str]) -> None:
        if item.source_file is not None:
            item.stored_file = self._put(paths.blob_address(item.sha256, paths.CHECKPOINT_SUFFIX), file_chunks(item.source_file), created)
        for image in item.preview_images:
            address = paths.blob_address(hashlib.sha256(image.data).hexdigest(), image.format)
            item.stored_previews.append(self._put(address, [image.data], created))

    def _put(self, address: str, chunks: Iterable[bytes], created: list[str]) -> str:
        if address not in created:
            self._write(address, chunks)
            created.append(address)
        return address

    def _write(self, address: str, chunks: Iterable[bytes]) -> None:
        """Always rewrite, even the same bytes: a fresh modification time tells repairs elsewhere it is in use."""
        final = self._remote(address)
        folder, name = final.rsplit("/", 1)
        tmp = f"{folder}/{TMP_PREFIX}{uuid.uuid4().hex}-{name}"
        self.fs.makedirs(folder, exist_ok=True)
        try:
            with self.fs.open(tmp, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
            self.fs.mv(tmp, final)
        finally:
            if self.fs.exists(tmp):
                self.fs.rm(tmp)

    # ---- removing

    def unwrite(self, created: list[str], referenced: Collection[str]) -> None:
        self._collect(created, referenced)

    def release(self, checkpoint_id: str, addresses: list[str], referenced: Collection[str]) -> None:
        self._collect(addresses, referenced)

    def _collect(self, addresses: Iterable[str], referenced: Collection[str]) -> None:
        """Delete the blobs no row names that are old enough not to be another node's add in progress."""
        self.remove([a for a in dict.fromkeys(addresses) if paths.blob_digest(a) and a not in referenced and self._old(a)])

    def remove(self, addresses: list[str]) -> None:
        for address in addresses:
            try:
                self.fs.rm(self._remote(address, temporary_ok=True))
            except FileNotFoundError:
                pass

    def _old(self, address: str) -> bool:
        if self.grace_s <= 0:
            return True
        try:
            modified = self.fs.modified(self._remote(address, temporary_ok=True))
        except (FileNotFoundError, NotImplementedError):
            return False  # gone already, or no way to tell: keep it
        if modified.tzinfo is None:
            modified = modified.replace(tzinfo=timezone.utc)
        return (datetime.now(timezone.utc) - modified).total_seconds() > self.grace_s

    # ---- reading

    def existing(self, value: Any, what: str, checkpoint: bool) -> tuple[str, Path]:
        address = paths.check_blob(value, what, checkpoint)
        if not self.fs.exists(self._remote(address)):
            raise UnsafePathError(f"{what} {address!r} is not in the shared file place; use `personalq repo add` to import weights")
        return address, self.local_copy(address)

    def local_copy(self, address: str) -> Path:
        """This node's copy, fetched once and checked against the hash its name states."""
        local = paths.blob_path(self.local_root, address)
        if local.is_file():
            return local
        digest = hashlib.sha256()

        def chunks() -> Iterator[bytes]:
            with self.fs.open(self._remote(address), "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
                    yield block

        atomic_write(local, chunks())
        if digest.hexdigest() != paths.blob_digest(address):
            local.unlink(missing_ok=True)
            raise StoreError(f"{address}: the shared file place holds other bytes than its name's SHA-256 (changed by hand?)")
        return local

    # ---- files and rows agree

    def compare(self, referenced: dict[str, list[str]]) -> ConsistencyReport:
        """Read `referenced` before calling: a row committed after the listing then names a file already listed."""
        owned = {i: [a for a in names if paths.blob_digest(a)] for i, names in referenced.items()}
        blobs, temporary = self._listing()
        present = set(blobs)
        report = compare([*blobs, *temporary], owned, present.__contains__)
        report.orphan_files = [a for a in report.orphan_files if self._old(a)]
        report.temporary_files = [a for a in report.temporary_files if self._old(a)]
        return report

    def _listing(self) -> tuple[list[str], list[str]]:
        """(blob addresses, half-written `.tmp-*` files) directly in `sha256/<xx>/`; anything else is not ours to judge."""
        top = f"{self.root}/{paths.BLOBS}"
        blobs, temporary = [], []
        for found in sorted(self.fs.find(top)) if self.fs.exists(top) else []:
            relative = found[len(self.root) + 1 :]
            if not found.startswith(f"{self.root}/"):
                continue
            if paths.temporary_blob(relative):
                temporary.append(relative)
            elif paths.blob_digest(relative):
                blobs.append(relative)
        return blobs, temporary

    def _remote(self, address: str, temporary_ok: bool = False) -> str:
        """The place's name for an address, which must be a blob address (or, for repairs, a `.tmp-*` in a blob folder)."""
        if not (paths.blob_digest(address) or (temporary_ok and paths.temporary_blob(address))):
            raise UnsafePathError(f"{str(address)[:120]!r} is not a blob address")
        return f"{self.root}/{address}"


class SharedFolder(SharedFiles):
    """Blobs in a folder all nodes mount; the folder holds the write lock, so nothing needs a grace period."""

    def __init__(self, folder: Path):
        from fsspec.implementations.local import LocalFileSystem

        super().__init__(LocalFileSystem(), folder.as_posix(), folder, folder / WRITE_LOCK_NAME, grace_s=0.0)

    def _put(self, address: str, chunks: Iterable[bytes], created: list[str]) -> str:
        """Under the shared lock nobody deletes a blob meanwhile: bytes already there are kept, not rewritten."""
        if not paths.blob_path(self.local_root, address).is_file():
            super()._put(address, chunks, created)
        return address

    def _write(self, address: str, chunks: Iterable[bytes]) -> None:
        atomic_write(paths.blob_path(self.local_root, address), chunks)

    def local_copy(self, address: str) -> Path:
        return paths.blob_path(self.local_root, address)


def file_place(home: Path, files_url: str | None) -> FilePlace:
    """The home's own folders, or the shared place `files_url` names: a folder path or `file://` URL is a
    `SharedFolder`, any other fsspec URL a `SharedFiles` (fsspec is imported only then)."""
    if not files_url:
        return HomeFiles(home)
    from fsspec.core import url_to_fs
    from fsspec.implementations.local import LocalFileSystem

    if "://" not in files_url and "::" not in files_url:
        files_url = str(Path(files_url).expanduser())
    fs, root = url_to_fs(files_url)
    if isinstance(fs, LocalFileSystem):
        folder = Path(root).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        return SharedFolder(folder)
    return SharedFiles(fs, root, home / CACHE, home / WRITE_LOCK_NAME, ORPHAN_GRACE_S)
