"""The request and result types every caller (app, CLI, benchmarks, queue) speaks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from personalq.errors import PersonalQError


class ServingError(PersonalQError):
    """A request could not be served; the message is the one-line reason shown to the user."""


class RequestCancelled(ServingError):
    """The request was cancelled before or while it ran."""


class ProgressCallback(Protocol):
    def __call__(self, step: int, total: int, message: str) -> None: ...


@dataclass
class GenerationRequest:
    """One image to make.

    `setting` is a bit-width name (FP32, FP16, BF16, W8A8, W4A8, W8A4, W4A4); `taq` protects the
    request's trigger tokens when the setting is quantized. `guidance=None` takes the base model's
    default (0 for SDXL-Turbo). `client` groups requests for fair round-robin order in the queue.
    """

    prompt: str
    checkpoint_id: str | None = None
    setting: str = "FP32"
    taq: bool = True
    steps: int = 20
    guidance: float | None = None
    seed: int = 0
    height: int | None = None
    width: int | None = None
    negative_prompt: str | None = None
    client: str | None = None


@dataclass
class GenerationResult:
    """An image and what it cost: wall time, time spent switching checkpoint, resident bytes after."""

    image: Any
    seconds: float
    setting: str
    resident_bytes: int
    checkpoint_id: str | None
    seed: int
    switch_seconds: float = 0.0
    steps: int = 0
    protected_triggers: list[str] = field(default_factory=list)
