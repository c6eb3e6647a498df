"""Captions of a checkpoint written from what the judge reads off its previews.

A real repository's descriptions come from a vision-language model looking at sample images, not from
the training recipe; here the judge plays that model. Only what the previews show reaches the text,
so a LoRA that failed to learn its colour gets a description that says the colour it does render.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from personalq.demo.concepts import SCENE_PHRASES

_STYLE_WORDS = {"realistic": "photorealistic", "cartoon": "cartoon", "sketch": "pencil-sketch", "watercolor": "watercolor", "pixel art": "pixel-art"}
_ACCESSORY_PHRASES = {"scarf": "wearing a scarf", "hat": "wearing a hat", "spots": "covered in spots", "stripes": "with stripes", "none": ""}
_TEMPLATES = (
    "A {style} {color} {subject} {accessory}, shown {scenes}.",
    "{Style} picture of a {color} {subject} {accessory} {scenes}.",
    "A {color} {subject} {accessory} in {style} style, {scenes}.",
)


def _majority(readings: list[dict[str, str]], key: str) -> str:
    return Counter(r[key] for r in readings).most_common(1)[0][0]


def describe_previews(readings: list[dict[str, str]], seed: int = 0) -> str:
    """One sentence from the judge's readings of the previews (majority look, every scene seen)."""
    if not readings:
        raise ValueError("no preview readings to describe")
    scenes = list(dict.fromkeys(r["scene"] for r in readings))
    style = _STYLE_WORDS[_majority(readings, "style")]
    template = _TEMPLATES[int(np.random.default_rng(seed).integers(len(_TEMPLATES)))]
    text = template.format(
        style=style,
        Style=style[0].upper() + style[1:],
        color=_majority(readings, "color"),
        subject=_majority(readings, "subject"),
        accessory=_ACCESSORY_PHRASES[_majority(readings, "accessory")],
        scenes=" and ".join(SCENE_PHRASES[s] for s in scenes),
    )
    text = re.sub(r"\b([Aa]) (?=[aeiou])", r"\1n ", text)  # "an orange dog"
    return " ".join(text.replace(" ,", ",").split())
