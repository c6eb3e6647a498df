"""Prompt alignment of PQ-Nano images, read by the judge: the offline stand-in for CLIP score.

Alignment of one image = the fraction of the attributes its caption names that the judge finds.
The report averages per attribute (each over the captions that name it), so a frequently named
attribute does not drown a rare one, and gives the subject alone as the headline figure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from personalq.nano.world import Caption, WorldAttributes, describe, sample_attributes


@dataclass(frozen=True)
class PromptCase:
    attrs: WorldAttributes
    caption: Caption


def held_out_cases(n: int, seed: int = 2024) -> list[PromptCase]:
    """World captions from a seed the training data never uses (training seeds are < 1000)."""
    rng = np.random.default_rng([seed, 7919])
    cases = []
    for _ in range(n):
        attrs = sample_attributes(rng)
        cases.append(PromptCase(attrs, describe(attrs, rng)))
    return cases


def generate(pipe, prompts: list[str], seed: int = 0, steps: int = 20, guidance: float = 4.0, batch_size: int = 50):
    """Images for `prompts`, each from its own seeded generator so a subset reproduces exactly."""
    device = pipe.device
    images = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        generators = [torch.Generator(device="cpu").manual_seed(seed + start + i) for i in range(len(chunk))]
        latents = torch.stack([torch.randn(pipe.unet.config.in_channels, pipe.unet.config.sample_size,
                                           pipe.unet.config.sample_size, generator=g) for g in generators])
        out = pipe(chunk, num_inference_steps=steps, guidance_scale=guidance, latents=latents.to(device, pipe.unet.dtype),
                   height=64, width=64)
        images.extend(out.images)
    return images


def alignment_scores(judge, images, cases: list[PromptCase]) -> dict[str, float]:
    """Per-attribute hit rate over captions naming it, their mean, and the per-image mean."""
    predicted = judge.predict(images)
    hits: dict[str, list[bool]] = {}
    per_image = []
    for pred, case in zip(predicted, cases):
        found = [pred[name] == getattr(case.attrs, name) for name in case.caption.named]
        for name, ok in zip(case.caption.named, found):
            hits.setdefault(name, []).append(ok)
        per_image.append(np.mean(found))
    report = {f"alignment_{name}": float(np.mean(v)) for name, v in sorted(hits.items())}
    report["alignment_mean_over_attributes"] = float(np.mean([np.mean(v) for v in hits.values()]))
    report["alignment_per_image"] = float(np.mean(per_image))
    report["n"] = len(cases)
    return report
