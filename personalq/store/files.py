"""A checkpoint's files in the store: written whole (temporary name, fsync, rename) at commit, and
taken away again when the commit fails, so a refused add leaves no file behind."""

from __future__ import annotations

import shutil
from pathlib import Path

from personalq.atomic_write import atomic_write, file_chunks
from personalq.store import paths
from personalq.store.intake import Prepared


def write_files(home: Path, item: Prepared, created: list[Path]) -> None:
    """Copy the checkpoint file and write its re-encoded previews; every path written goes into `created`."""
    if item.source_file is not None:
        dest = paths.checkpoint_path(home, item.context.id)
        atomic_write(dest, file_chunks(item.source_file))
        created.append(dest)
    if item.preview_images:
        folder = paths.preview_dir(home, item.context.id)
        if folder.exists():  # left by a crash before commit: the id is not in the catalog
            shutil.rmtree(folder)
        for n, image in enumerate(item.preview_images):
            dest = paths.preview_path(home, item.context.id, n, image.format)
            atomic_write(dest, image.data)
            created.append(dest)
            item.stored_previews.append(paths.relative(home, dest))


def unwrite_files(home: Path, created: list[Path]) -> None:
    """Undo `write_files`: remove what it wrote, and preview folders it leaves empty."""
    for path in reversed(created):
        path.unlink(missing_ok=True)
        if path.parent.parent == home / paths.PREVIEWS and path.parent.is_dir() and not any(path.parent.iterdir()):
            path.parent.rmdir()


def remove_checkpoint_files(home: Path, checkpoint_id: str, file_path: Path | None) -> None:
    """Delete a removed checkpoint's file (when the store holds it) and its previews."""
    if file_path is not None and file_path.resolve() == paths.checkpoint_path(home, checkpoint_id):
        file_path.unlink(missing_ok=True)
    shutil.rmtree(paths.preview_dir(home, checkpoint_id), ignore_errors=True)
