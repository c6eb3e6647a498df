"""A few of the shipped demo checkpoints, copied into a folder as `repo import` takes them (weights,
sidecar, previews), for the tests that import real checkpoints through a server."""

from __future__ import annotations

import shutil
from pathlib import Path

DEMO_REPO = Path(__file__).resolve().parents[1] / "assets" / "demo_repo"


def copy_demo(folder: Path, names: list[str]) -> Path:
    """Every demo file of each named checkpoint, copied into `folder` (made if needed); returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        for path in DEMO_REPO.glob(f"{name}.*"):
            shutil.copy(path, folder / path.name)
    return folder
