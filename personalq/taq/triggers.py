"""Where a trigger sits in the token sequence, and the per-call protection masks built from it.

Protection travels with each call as `cross_attention_kwargs={"taq_protect": mask}` (a bool tensor,
one row per UNet batch row, one column per text token), so one quantized UNet serves prompts with
different triggers, both halves of classifier-free guidance and mixed batches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

PROTECT_KWARG = "taq_protect"
TRIGGER_PATTERN = re.compile(r"<[^<>\s]+>")
"""How triggers are written in PersonalQ prompts (`<sks>`, `<bear-v4>`), for when none are given."""


@dataclass(frozen=True)
class TriggerSpan:
    """Token positions [start, end) of one trigger occurrence in the tokenized prompt."""

    trigger: str
    start: int
    end: int
    tokens: tuple[str, ...]

    @property
    def positions(self) -> range:
        return range(self.start, self.end)


def detect_triggers(prompt: str) -> list[str]:
    """The `<...>` words of a prompt, in order, without repeats."""
    return list(dict.fromkeys(TRIGGER_PATTERN.findall(prompt)))


def _encode(tokenizer, prompt: str):
    return tokenizer(
        prompt,
        padding="max_length",
        max_length=tokenizer.model_max_length,
        truncation=True,
        return_offsets_mapping=True,
    )


def find_trigger_spans(tokenizer, prompt: str, triggers: list[str] | None) -> list[TriggerSpan]:
    """Every occurrence of every trigger, as the token positions the text encoder sees.

    Characters are matched in the prompt and mapped to tokens through the tokenizer's offsets, so a
    trigger that BPE splits into several sub-tokens, or that merges with neighbouring punctuation,
    is covered whole. Occurrences cut off by the 77-token limit are dropped.
    """
    if triggers is None:
        triggers = detect_triggers(prompt)
    encoding = _encode(tokenizer, prompt)
    offsets = encoding["offset_mapping"]
    ids = encoding["input_ids"]
    lowered = prompt.lower()
    spans = []
    for trigger in triggers:
        if not trigger:
            continue
        for match in re.finditer(re.escape(trigger.lower()), lowered):
            positions = [
                i
                for i, (a, b) in enumerate(offsets)
                if b > a and a < match.end() and b > match.start() and ids[i] not in tokenizer.all_special_ids
            ]
            if positions:
                start, end = positions[0], positions[-1] + 1
                spans.append(TriggerSpan(trigger, start, end, tuple(tokenizer.convert_ids_to_tokens(ids[start:end]))))
    return sorted(spans, key=lambda s: s.start)


def protection_mask(tokenizer, prompts: list[str], triggers: list[str] | None, protect: str) -> torch.Tensor:
    """Bool [len(prompts), max_length]: True where a token stays full precision under `protect`."""
    mask = torch.zeros(len(prompts), tokenizer.model_max_length, dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        if "trigger" in protect:
            for span in find_trigger_spans(tokenizer, prompt, triggers):
                mask[row, span.start : span.end] = True
        if "bos" in protect:
            mask[row, 0] = True
    return mask


def protection_kwargs(
    pipe,
    prompts: str | list[str],
    triggers: list[str] | None = None,
    do_classifier_free_guidance: bool = True,
    negative_prompts: str | list[str] | None = None,
    num_images_per_prompt: int = 1,
    protect: str | None = None,
) -> dict:
    """The `cross_attention_kwargs` for one pipeline call, rows in the order the pipeline batches them.

    With guidance the pipeline stacks [unconditional; conditional]; unconditional rows hold no
    trigger, so they protect only the start token, and only when `bos` protection is on.
    `protect` defaults to the mode the UNet was quantized with; a UNet without TAQ gets `{}`.
    `triggers=None` protects every `<...>` word found in each prompt.
    """
    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    state = getattr(pipe.unet, "taq_state", None)
    if state is None:
        return {}
    protect = protect or state.config.protect
    mask = protection_mask(pipe.tokenizer, prompts, triggers, protect)
    if do_classifier_free_guidance:
        negatives = [""] * len(prompts) if negative_prompts is None else negative_prompts
        negatives = [negatives] * len(prompts) if isinstance(negatives, str) else list(negatives)
        if len(negatives) != len(prompts):
            raise ValueError(f"{len(negatives)} negative prompts for {len(prompts)} prompts")
        uncond = protection_mask(pipe.tokenizer, negatives, [], "bos" if "bos" in protect else "none")
        mask = torch.cat([uncond, mask])
    return {PROTECT_KWARG: mask.repeat_interleave(num_images_per_prompt, dim=0)}
