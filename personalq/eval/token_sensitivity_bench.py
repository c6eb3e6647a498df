"""`personalq bench tokens`: the TAQ token-sensitivity analyzer over personal checkpoints, aggregated.

For each concept its LoRA is attached to the float base model and `personalq.taq.analyze` quantizes
one token's K/V rows at a time. The prompt template is the same for every concept, so once each
trigger is labelled `<trigger>` and each class noun `<class noun>`, the records line up token by
token and average over concepts and seeds (a class noun is relabelled where the tokenizer keeps it
one token, as PQ-Nano's does for every world subject). Judge-based drift is the drop in the judge's probability
for the concept's looks, so it measures the concept fading, not just pixels moving.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

from personalq.eval.quality_bench import Concept

TEMPLATE = "a cartoon {trigger} {class_noun} in the park"
TRIGGER_LABEL = "<trigger>"
CLASS_LABEL = "<class noun>"


def looks_probability(judge, looks: dict[str, str]):
    """A scorer for the analyzer: (image, text) -> mean judge probability of the concept's looks."""

    def score(image, text: str) -> float:
        logits = judge.logits([image])
        probs = [torch.softmax(logits[k][0], dim=0)[judge.net.vocab[k].index(v)].item() for k, v in looks.items()]
        return float(np.mean(probs))

    return score


def token_sensitivity(pipe, concepts: Sequence[Concept], judge, bits: int = 4, seeds: Sequence[int] = (0, 1),
                      steps: int = 10, guidance: float = 4.0, template: str = TEMPLATE) -> list:
    """TokenRecords over every concept and seed, triggers and class nouns relabelled so they aggregate."""
    from personalq.personalize import attach_personalized_lora
    from personalq.taq.analyze import analyze_tokens

    records = []
    for concept in concepts:
        attach_personalized_lora(pipe, concept.lora_path, adapter_name="sensitivity")
        try:
            prompt = template.format(trigger=concept.trigger, class_noun=concept.class_noun)
            found = analyze_tokens({concept.name: pipe}, prompt, [concept.trigger], bits=bits, seeds=tuple(seeds),
                                   num_inference_steps=steps, guidance_scale=guidance,
                                   scorer=looks_probability(judge, concept.looks_dict))
        finally:
            pipe.delete_adapters("sensitivity")
        for record in found:
            label = TRIGGER_LABEL if record.is_trigger else CLASS_LABEL if record.token == concept.class_noun else record.token
            records.append(dataclasses.replace(record, token=label))
    return records

