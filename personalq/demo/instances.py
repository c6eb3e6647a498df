"""What both the demo build and its fidelity check start from: a concept's instance images, and the
base pipeline with one built concept attached. Kept apart from `build` so that `fidelity` can read
them without importing the build (which imports `fidelity` back for its held-out check)."""

from __future__ import annotations

import copy
from pathlib import Path

from PIL import Image

from personalq.demo.concepts import DemoConcept
from personalq.nano.world import render
from personalq.personalize import attach_personalized_lora

INSTANCE_IMAGES = 4


def instance_examples(concept: DemoConcept, seed: int = 0) -> list[tuple[Image.Image, str]]:
    attrs = concept.instance_attributes(INSTANCE_IMAGES)
    return [(render(a, seed=seed * 1000 + concept.version * 100 + i), concept.instance_caption(a.scene)) for i, a in enumerate(attrs)]


def pipeline_with(base_pipe, path: Path, concept: DemoConcept):
    """A copy of the base pipeline with one concept's file attached, the base left untouched for the next."""
    pipe = copy.deepcopy(base_pipe)
    attach_personalized_lora(pipe, path, adapter_name=concept.id.replace("-", "_"))
    return pipe
