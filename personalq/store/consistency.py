"""Rows and files agree: every file under `checkpoints/` and `previews/` belongs to a catalog row, and
every file a row names exists.

Adds write files first and commit the row last, both under the store's write lock, so a crash
(`kill -9`, power loss) can leave only files without a row (and `.tmp-*` halves of files); a row
without its file means someone deleted files by hand. `check` lists both kinds of disagreement;
`repair` removes orphan files and drops rows (or preview entries) whose files are gone. It must run
under the write lock: an add in progress holds it, so its files are never taken for orphans.
The comparison itself is the same for every file place (`personalq.store.files`); each place lists its
own files and judges only the addresses it writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from personalq.atomic_write import TMP_PREFIX
from personalq.store import paths


@dataclass
class ConsistencyReport:
    """Paths are addresses in the file place (relative to the home by default). `missing_files` are (checkpoint id, path) pairs."""

    orphan_files: list[str] = field(default_factory=list)
    temporary_files: list[str] = field(default_factory=list)
    missing_files: list[tuple[str, str]] = field(default_factory=list)
    repaired: bool = False

    @property
    def ok(self) -> bool:
        return not (self.orphan_files or self.temporary_files or self.missing_files)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "repaired": self.repaired,
            "orphan_files": self.orphan_files,
            "temporary_files": self.temporary_files,
            "missing_files": [{"id": i, "path": p} for i, p in self.missing_files],
        }


def stored_files(home: Path) -> list[str]:
    """Every file in the two folders the store writes, relative to the home, sorted."""
    found = []
    for folder in (paths.CHECKPOINTS, paths.PREVIEWS):
        root = home / folder
        if root.is_dir():
            found += [p.relative_to(home).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()]
    return sorted(found)


def compare(stored: Iterable[str], referenced: dict[str, list[str]], exists: Callable[[str], bool]) -> ConsistencyReport:
    """`stored`: the files a place holds; `referenced`: each checkpoint id's addresses (file and previews)
    that the place judges; `exists`: whether an address names a stored file."""
    named = {path for names in referenced.values() for path in names}
    report = ConsistencyReport()
    for path in stored:
        if PurePosixPath(path).name.startswith(TMP_PREFIX):
            report.temporary_files.append(path)
        elif path not in named:
            report.orphan_files.append(path)
    report.missing_files = [
        (checkpoint_id, path)
        for checkpoint_id, names in sorted(referenced.items())
        for path in names
        if not exists(path)
    ]
    return report


def remove_files(home: Path, relative_paths: list[str]) -> None:
    """Unlink the given files, then any preview folders left empty."""
    for path in relative_paths:
        (home / path).unlink(missing_ok=True)
    previews = home / paths.PREVIEWS
    if previews.is_dir():
        for folder in sorted(previews.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
