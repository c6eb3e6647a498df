"""Calibration (and held-out evaluation) prompts, templated from the pools in assets/prompt_pools/.

The held-out pools share no value with the calibration pools, so a quality benchmark that draws
held-out prompts never scores a prompt whose scene, light, style or action the scales were fit on.
"""

from __future__ import annotations

import itertools
import json
import random
from functools import lru_cache

from personalq.config import ASSETS_DIR

POOLS_FILE = ASSETS_DIR / "prompt_pools" / "pools.json"
SLOTS = ("scene", "time", "style", "action")


@lru_cache(maxsize=1)
def prompt_pools() -> dict:
    return json.loads(POOLS_FILE.read_text())


def calibration_prompts(n: int = 64, seed: int = 0, trigger: str = "<sks>", class_noun: str = "dog", split: str = "calibration") -> list[str]:
    """`n` distinct prompts "a photo of a {trigger} {class}, {scene}, {time}, {style}, {action}", seeded.

    `split="held_out"` draws from the disjoint evaluation pools instead.
    """
    pools = prompt_pools()
    if split not in ("calibration", "held_out"):
        raise ValueError(f"unknown split {split!r}: use 'calibration' or 'held_out'")
    values = [pools[split][slot] for slot in SLOTS]
    combos = list(itertools.product(*values))
    if not 1 <= n <= len(combos):
        raise ValueError(f"n={n} prompts requested; the {split} pools make 1..{len(combos)}")
    picked = random.Random(seed).sample(combos, n)
    return [
        pools["template"].format(trigger=trigger, class_noun=class_noun, **dict(zip(SLOTS, combo)))
        for combo in picked
    ]


def held_out_prompts(n: int = 16, seed: int = 0, trigger: str = "<sks>", class_noun: str = "dog") -> list[str]:
    """Evaluation prompts that share no pool value with any calibration prompt."""
    return calibration_prompts(n, seed, trigger, class_noun, split="held_out")
