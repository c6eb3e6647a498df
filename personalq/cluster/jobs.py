"""What travels between the library and a render replica, and the store a replica's manager sees.

Kept apart from the deployment so that it imports without Ray: the client, the replica and the
tests share these types whether or not a cluster is running.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from personalq.serving.requests import GenerationRequest, GenerationResult


def variant_key(checkpoint_id: str | None, setting: str) -> str:
    """The multiplexed model id of a request: one variant per (checkpoint, setting)."""
    return f"{checkpoint_id or '-'}@{setting}"


@dataclass
class RenderJob:
    """What travels to a replica: the request, its checkpoint's card (None for the plain base) and broken reason."""

    request: GenerationRequest
    card: Any = None
    broken_reason: str | None = None


@dataclass
class RenderOutcome:
    """What comes back: the result or the one-line refusal, plus the replica's routing figures.

    `loaded` says this request made the replica load its key (a multiplexing miss); `broken` is the
    reason to mark the checkpoint broken in the caller's store, when rendering it failed for its own fault.
    """

    replica: str
    loaded: bool
    result: GenerationResult | None = None
    error: str | None = None
    broken: str | None = None


@dataclass
class ForwardedCards:
    """The store a replica's manager sees: only the card sent with the request being rendered.

    It answers the manager's `get`, `broken` and `mark_broken`; marking happens in the caller's store.
    """

    card: Any = None
    broken_reason: str | None = None
    marked: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def serving(self, job: RenderJob) -> Iterator[ForwardedCards]:
        with self._lock:
            self.card, self.broken_reason, self.marked = job.card, job.broken_reason, None
            try:
                yield self
            finally:
                self.card = self.broken_reason = None

    def get(self, checkpoint_id: str):
        if self.card is None or self.card.id != checkpoint_id:
            raise KeyError(checkpoint_id)
        return self.card

    def broken(self) -> dict[str, str]:
        return {self.card.id: self.broken_reason} if self.card is not None and self.broken_reason else {}

    def mark_broken(self, checkpoint_id: str, reason: str) -> None:
        self.marked = reason
