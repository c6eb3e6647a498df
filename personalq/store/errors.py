"""What the store reports back: a one-line refusal, and the outcome of a batch import."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class StoreError(ValueError):
    """A refusal with a one-line reason; the store is unchanged when this is raised."""


@dataclass
class ImportReport:
    """Outcome of a batch import: what was added, skipped as a duplicate, or refused, with the reason."""

    added: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "added": list(self.added),
            "skipped": [{"source": str(s), "reason": r} for s, r in self.skipped],
            "refused": [{"source": str(s), "reason": r} for s, r in self.refused],
        }

    def merge(self, other: ImportReport) -> None:
        self.added += other.added
        self.skipped += other.skipped
        self.refused += other.refused


def source_label(path: Path | str, line: int | None = None) -> str:
    return f"{path}:{line}" if line is not None else str(path)
