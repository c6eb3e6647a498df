"""What a render gives back and how its inputs are read: progress events, labelled images, comparisons.

Kept apart from the service so that the types a UI or script handles (`Rendered`, `Comparison`) and the
reading of loose form input (a blank seed, a blank guidance) are one short module each can read at once.
"""

from __future__ import annotations

import queue
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personalq.service import images
from personalq.service.settings import whole_number
from personalq.setting import quantized_names

QUANTIZED_SETTINGS = tuple(quantized_names())


class AppError(ValueError):
    """A request the app refuses; the message is the one line the user sees."""


@dataclass(frozen=True)
class Progress:
    """One progress event of long work: sampling step i of n, or loading a checkpoint (step 0)."""

    step: int
    total: int
    message: str


@dataclass(frozen=True)
class Rendered:
    """A generated image, how it was made, what it cost, and its PNG file (parameters embedded)."""

    image: Any
    label: str
    result: Any  # serving's GenerationResult
    prompt: str = ""
    guidance: float | None = None
    taq: bool = True
    variant_bytes: int = 0  # the UNet variant that drew it: the FP32 UNet or its quantized copy
    path: Path | None = None

    @property
    def setting_label(self) -> str:
        setting = self.result.setting
        if setting in QUANTIZED_SETTINGS:
            setting += " + TAQ" if self.taq else " (no TAQ)"
        return setting

    def to_dict(self) -> dict:
        r = self.result
        return {"label": self.label, "setting": r.setting, "seconds": r.seconds, "resident_bytes": r.resident_bytes,
                "variant_bytes": self.variant_bytes, "checkpoint_id": r.checkpoint_id, "seed": r.seed, "steps": r.steps,
                "prompt": self.prompt, "file_name": self.path.name if self.path else None}


def describe(rendered: Rendered) -> str:
    """The image label: setting (with TAQ state when quantized), seed, steps, checkpoint, time, the variant's bytes."""
    r = rendered.result
    return (f"{rendered.setting_label} · seed {r.seed} · {r.steps} steps · {r.checkpoint_id or 'base'} · "
            f"{r.seconds:.2f} s · UNet {rendered.variant_bytes / 2**20:.2f} MiB")


@dataclass(frozen=True)
class Difference:
    """|variant - full precision|, amplified, with its mean absolute difference in 0-255 levels."""

    image: Any
    label: str
    mean_abs: float


@dataclass(frozen=True)
class Comparison:
    """One prompt, seed and checkpoint at several settings; `variants[0]` is full precision."""

    variants: list[Rendered]
    differences: list[Difference]

    @classmethod
    def of(cls, variants: list[Rendered]) -> Comparison:
        reference = variants[0]
        differences = []
        for variant in variants[1:]:
            shown, mean_abs = images.difference(variant.image, reference.image)
            label = (f"|{variant.setting_label} − {reference.setting_label}| ×{images.DIFFERENCE_GAIN} · "
                     f"mean {mean_abs:.2f}/255")
            differences.append(Difference(shown, label, mean_abs))
        return cls(variants, differences)

    def to_dict(self) -> dict:
        return {"variants": [v.to_dict() for v in self.variants],
                "differences": [{"label": d.label, "mean_abs": d.mean_abs} for d in self.differences]}


def resolve_seed(value: int | float | str | None) -> int:
    """A blank, "random" or negative seed draws one at random; anything else must be a whole number."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "random")):
        return secrets.randbelow(2**31)
    number = read_whole(value, "seed", 0)
    return secrets.randbelow(2**31) if number < 0 else number


def read_whole(value, name: str, default: int) -> int:
    number = whole_number(value, name, AppError)
    return default if number is None else number


def read_guidance(value: float | str | None) -> float | None:
    """A form field: blank means the model's own default."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise AppError(f"guidance must be a number or blank, got {value!r}") from None


def drain(handle, events: queue.Queue) -> Iterator[Progress]:
    """Progress events until the request is done, polled so the caller may be closed between them."""
    while not handle.done():
        try:
            yield events.get(timeout=0.1)
        except queue.Empty:
            continue
    while not events.empty():
        yield events.get_nowait()
