"""Rendered images as files a person keeps: lossless PNG, the parameters inside, a name that says what it is.

The "parameters" text chunk follows the layout AUTOMATIC1111's web UI writes (prompt line, then
"Steps: 20, Sampler: ..., CFG scale: 7.5, Seed: 3, Size: 64x64, Model: ..."), which image viewers,
galleries and other Stable Diffusion tools already read, with PersonalQ's own fields appended.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from PIL import Image
from PIL.PngImagePlugin import PngInfo

DIFFERENCE_GAIN = 4
"""Differences between bit-widths are a few levels out of 255; amplified so the eye can see where they are."""


def parameters_text(prompt: str, *, steps: int, guidance: float | None, seed: int, size: tuple[int, int],
                    base_model: str, checkpoint: str | None, setting: str, seconds: float) -> str:
    """The A1111-style "parameters" text: the prompt, then one line of comma-separated `Key: value` pairs."""
    fields = {"Steps": steps, "CFG scale": "default" if guidance is None else f"{guidance:g}", "Seed": seed,
              "Size": f"{size[0]}x{size[1]}", "Model": base_model, "Checkpoint": checkpoint or "none",
              "Setting": setting, "Time taken": f"{seconds:.2f}s", "Software": "PersonalQ"}
    return f"{' '.join(prompt.split())}\n" + ", ".join(f"{key}: {value}" for key, value in fields.items())


def file_name(checkpoint: str | None, setting: str, seed: int, steps: int) -> str:
    """e.g. `bear-v2_W8A8-TAQ_seed3_20steps.png`: only characters every file system accepts."""
    stem = f"{checkpoint or 'base'}_{setting}_seed{seed}_{steps}steps"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-") + ".png"


def save_png(image: Image.Image, path: Path, parameters: str) -> Path:
    info = PngInfo()
    info.add_text("parameters", parameters)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.convert("RGB").save(path, format="PNG", pnginfo=info)
    return path


def difference(image: Image.Image, reference: Image.Image) -> tuple[Image.Image, float]:
    """|image - reference| per channel, amplified, and the mean absolute difference in 0-255 levels."""
    a = np.asarray(image.convert("RGB"), dtype=np.int16)
    b = np.asarray(reference.convert("RGB").resize(image.size), dtype=np.int16)
    diff = np.abs(a - b)
    shown = np.clip(diff * DIFFERENCE_GAIN, 0, 255).astype(np.uint8)
    return Image.fromarray(shown), float(diff.mean())
