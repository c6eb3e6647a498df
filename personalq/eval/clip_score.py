"""CLIP score for machines that have a real CLIP: the same evaluation, with CLIP in place of the judge.

The judge only knows the PQ-Nano world; on a machine with the hub (or a local CLIP folder),
`personalq bench nano --clip PATH` scores the same images with CLIP as published work does.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch


@lru_cache(maxsize=2)
def _load(path: str):
    from transformers import CLIPModel, CLIPProcessor

    return CLIPModel.from_pretrained(path).eval(), CLIPProcessor.from_pretrained(path)


@torch.no_grad()
def clip_score(images, texts: list[str], model_path: str | Path, batch_size: int = 32) -> float:
    """Mean of 100 * max(cos(image, text), 0) over pairs (Hessel et al., 2021, as in torchmetrics)."""
    model, processor = _load(str(model_path))
    scores = []
    for start in range(0, len(images), batch_size):
        inputs = processor(text=texts[start : start + batch_size], images=[im.convert("RGB") for im in images[start : start + batch_size]],
                           return_tensors="pt", padding=True, truncation=True)
        image = model.get_image_features(pixel_values=inputs["pixel_values"])
        text = model.get_text_features(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        image = getattr(image, "pooler_output", image)
        text = getattr(text, "pooler_output", text)
        cos = torch.nn.functional.cosine_similarity(image, text, dim=-1)
        scores.append(100 * cos.clamp(min=0))
    return float(torch.cat(scores).mean())
