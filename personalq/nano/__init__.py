"""PQ-Nano: PersonalQ's small offline text-to-image model, its training world and its judge.

Newcomers without a GPU or a 4 GB download still see the whole product work on PQ-Nano, and the
project measures TAQ and personalization on it with no model downloads. It is a plain diffusers
`StableDiffusionPipeline` folder, so every code path that runs on SD 1.5 runs on it unchanged.
"""

from __future__ import annotations

from personalq.config import ASSETS_DIR
from personalq.diffusers_import import DIFFUSERS_IMPORT

NANO_PATH = ASSETS_DIR / "pq-nano"
JUDGE_PATH = ASSETS_DIR / "pq-nano-judge"
DEFAULT_GUIDANCE = 4.0
"""PQ-Nano's classifier-free guidance: 7.5 (the SD default) over-saturates and darkens colours."""
DEFAULT_STEPS = 20


def load_pipeline(device: str = "cpu", path=NANO_PATH):
    """The shipped PQ-Nano as a fp32 `StableDiffusionPipeline`, loaded with no network access."""
    with DIFFUSERS_IMPORT:
        from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(str(path), local_files_only=True).to(device)
    pipe.set_progress_bar_config(disable=True)
    return pipe
