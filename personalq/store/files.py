"""Where a store keeps checkpoint files and previews: the `FilePlace` protocol and its default, the home.

A place writes a checkpoint's files whole (temporary name, fsync, rename) at commit and takes them
away again when the commit fails, so a refused add leaves no file behind; it records in the item the
addresses the catalog row will name; it turns an address into a local path a renderer can open; and
it says which of its files no row names (`compare`). `HomeFiles` is the layout under the store's home
(`checkpoints/<id>.safetensors`, `previews/<id>/<n>.<ext>`); `personalq.store.shared_files` keeps them
by content hash in a folder or an fsspec URL that several nodes share (`PERSONALQ_FILES_URL`).
"""

from __future__ import annotations

import shutil
from collections.abc import Collection
from pathlib import Path
from typing import Any, Protocol

from personalq.atomic_write import atomic_write, file_chunks
from personalq.store import paths
from personalq.store.consistency import ConsistencyReport, compare, remove_files, stored_files
from personalq.store.intake import Prepared

WRITE_LOCK_NAME = ".write.lock"


class FilePlace(Protocol):
    """What `RepoStore` needs from the place its checkpoint files and previews live in.

    Addresses are the strings catalog rows hold; `local_root / address` is where this node reads one.
    """

    local_root: Path
    lock_path: Path  # the file lock every writer of this place holds while it writes files and rows

    def write(self, item: Prepared, created: list[str]) -> None:
        """Write the item's checkpoint file and previews, set its stored addresses, append what was written to `created`."""
        ...

    def unwrite(self, created: list[str], referenced: Collection[str]) -> None:
        """Undo `write` after a failed commit; `referenced` are the created addresses some committed row still names."""
        ...

    def release(self, checkpoint_id: str, addresses: list[str], referenced: Collection[str]) -> None:
        """A removed checkpoint's files go, except those in `referenced` (still named by another row)."""
        ...

    def existing(self, value: Any, what: str, checkpoint: bool) -> tuple[str, Path]:
        """(address, local path) of a file a catalog entry names, refused unless it is already in the place."""
        ...

    def local_copy(self, address: str) -> Path:
        """The local path of a stored file, fetched to this node first where the place is remote."""
        ...

    def compare(self, referenced: dict[str, list[str]]) -> ConsistencyReport:
        """Files without a row, half-written files, and rows' addresses with no file (only addresses this place writes)."""
        ...

    def remove(self, addresses: list[str]) -> None:
        """Delete orphan and half-written files that `compare` reported."""
        ...


class HomeFiles:
    """The default place: `checkpoints/<id>.safetensors` and `previews/<id>/<n>.<ext>` under the home."""

    def __init__(self, home: Path):
        self.local_root = home
        self.lock_path = home / WRITE_LOCK_NAME

    def write(self, item: Prepared, created: list[str]) -> None:
        home = self.local_root
        if item.source_file is not None:
            dest = paths.checkpoint_path(home, item.context.id)
            atomic_write(dest, file_chunks(item.source_file))
            item.stored_file = paths.relative(home, dest)
            created.append(item.stored_file)
        if item.preview_images:
            folder = paths.preview_dir(home, item.context.id)
            if folder.exists():  # left by a crash before commit: the id is not in the catalog
                shutil.rmtree(folder)
            for n, image in enumerate(item.preview_images):
                dest = paths.preview_path(home, item.context.id, n, image.format)
                atomic_write(dest, image.data)
                item.stored_previews.append(paths.relative(home, dest))
                created.append(item.stored_previews[-1])

    def unwrite(self, created: list[str], referenced: Collection[str] = ()) -> None:
        """Files under the home belong to one id, so nothing else can name them: all of them go."""
        home = self.local_root
        for address in reversed(created):
            path = home / address
            path.unlink(missing_ok=True)
            if path.parent.parent == home / paths.PREVIEWS and path.parent.is_dir() and not any(path.parent.iterdir()):
                path.parent.rmdir()

    def release(self, checkpoint_id: str, addresses: list[str], referenced: Collection[str] = ()) -> None:
        """Delete the checkpoint's file (when the store holds it) and its previews' folder."""
        home = self.local_root
        checkpoint = paths.checkpoint_path(home, checkpoint_id)
        if any((home / address).resolve() == checkpoint for address in addresses):
            checkpoint.unlink(missing_ok=True)
        shutil.rmtree(paths.preview_dir(home, checkpoint_id), ignore_errors=True)

    def existing(self, value: Any, what: str, checkpoint: bool) -> tuple[str, Path]:
        home = self.local_root
        path = paths.existing_inside(home, value, what, paths.CHECKPOINTS if checkpoint else paths.PREVIEWS)
        return paths.relative(home, path), path

    def local_copy(self, address: str) -> Path:
        return self.local_root / address

    def compare(self, referenced: dict[str, list[str]]) -> ConsistencyReport:
        owned = {i: [a for a in names if a.startswith((f"{paths.CHECKPOINTS}/", f"{paths.PREVIEWS}/"))] for i, names in referenced.items()}
        home = self.local_root
        return compare(stored_files(home), owned, lambda address: (home / address).is_file())

    def remove(self, addresses: list[str]) -> None:
        remove_files(self.local_root, addresses)
