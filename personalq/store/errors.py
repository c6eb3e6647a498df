"""What the store reports back: one error hierarchy whose messages are the one-line refusals, and the
outcome of a batch import.

Every refusal is a `StoreError`: callers (CLI, app, imports) catch that one class and print its
message as it is; the subclasses say which boundary refused, so tests and callers can tell them apart.
A `StoreError` is raised before anything is written, so the store is unchanged when it is raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from personalq.errors import PersonalQError, one_line

__all__ = [
    "ConflictError", "DuplicateError", "ImageRefused", "ImportReport", "MetadataRefused", "StoreError", "UnsafePathError",
    "WeightsRefused", "one_line", "source_label",
]


class StoreError(PersonalQError, ValueError):
    """A refusal with a one-line reason; the store is unchanged when this is raised."""


class UnsafePathError(StoreError):
    """A path the store would write or read is not built from validated parts inside its home."""


class ImageRefused(StoreError):
    """A preview or header thumbnail is not a decodable PNG, JPEG or WebP image within the limits."""


class MetadataRefused(StoreError):
    """Header or sidecar metadata is too deep, too large or of the wrong type."""


class WeightsRefused(StoreError):
    """The tensors do not fit the base model they name, or are not finite."""


class DuplicateError(StoreError):
    """The same weights (SHA-256) are already in the store: an import skips these rather than refusing."""


class ConflictError(StoreError):
    """The id is taken, possibly by an add that ran at the same time in another thread or process."""


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
