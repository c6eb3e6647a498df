"""The personalized-LoRA file: one `.safetensors` that carries a whole personal concept.

A DreamBooth-LoRA with pivotal tuning has two halves that only work together: the UNet LoRA and the
embedding of the new trigger token. Shipping them as two files invites loading one without the other,
so both live in one safetensors file:

- `unet.<module>.lora.down.weight` / `.lora.up.weight`: the UNet LoRA in diffusers' format, so that
  `pipe.load_lora_weights(path)` loads the file as it is (the rank/alpha ride in diffusers' own
  `lora_adapter_metadata` header key);
- `lora_trigger_embedding.<trigger>`: one `(1, hidden)` row per trigger. The key holds "lora" because
  diffusers refuses any file with a key that does not, and no "unet."/"text_encoder." prefix, so
  diffusers' LoRA loaders leave it alone;
- ModelSpec keys in `__metadata__` (title, date, trigger phrase, description, architecture, resolution)
  so that any ModelSpec reader, PersonalQ's import included, knows what the file is without a sidecar.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save

from personalq.atomic_write import atomic_write

TRIGGER_KEY_PREFIX = "lora_trigger_embedding."
UNET_PREFIX = "unet."
LORA_ADAPTER_METADATA_KEY = "lora_adapter_metadata"  # diffusers.loaders.lora_base reads this key


@dataclass
class ModelSpec:
    """The Stability AI ModelSpec 1.0 header of a personalized LoRA (plus PersonalQ's class noun)."""

    title: str
    triggers: list[str]
    architecture: str
    resolution: str
    description: str = ""
    date: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    tags: list[str] = field(default_factory=list)
    base_model: str = ""
    class_noun: str = ""
    thumbnail: str = ""

    def to_header(self) -> dict[str, str]:
        header = {
            "modelspec.sai_model_spec": "1.0.0",
            "modelspec.architecture": self.architecture,
            "modelspec.implementation": "diffusers",
            "modelspec.title": self.title,
            "modelspec.date": self.date,
            "modelspec.resolution": self.resolution,
            "modelspec.trigger_phrase": ", ".join(self.triggers),
            "modelspec.description": self.description,
            "modelspec.tags": ", ".join(self.tags),
            "modelspec.prediction_type": "epsilon",
            "personalq.base_model": self.base_model,
            "personalq.class_noun": self.class_noun,
            "personalq.triggers": json.dumps(self.triggers),
        }
        if self.thumbnail:
            header["modelspec.thumbnail"] = self.thumbnail
        return {k: v for k, v in header.items() if v}

    @classmethod
    def from_header(cls, header: dict[str, str]) -> ModelSpec:
        triggers = json.loads(header["personalq.triggers"]) if "personalq.triggers" in header else [
            t.strip() for t in header.get("modelspec.trigger_phrase", "").split(",") if t.strip()
        ]
        return cls(
            title=header.get("modelspec.title", ""),
            triggers=triggers,
            architecture=header.get("modelspec.architecture", ""),
            resolution=header.get("modelspec.resolution", ""),
            description=header.get("modelspec.description", ""),
            date=header.get("modelspec.date", ""),
            tags=[t.strip() for t in header.get("modelspec.tags", "").split(",") if t.strip()],
            base_model=header.get("personalq.base_model", ""),
            class_noun=header.get("personalq.class_noun", ""),
            thumbnail=header.get("modelspec.thumbnail", ""),
        )


def save_personalized_lora(
    path: str | Path,
    unet_lora_state_dict: dict[str, torch.Tensor],
    trigger_embeddings: dict[str, torch.Tensor],
    spec: ModelSpec,
    lora_config: dict | None = None,
) -> Path:
    """Write the LoRA, its trigger embeddings and its ModelSpec header atomically to `path`.

    `unet_lora_state_dict` is diffusers-format (as `convert_state_dict_to_diffusers` gives), without the
    `unet.` prefix; `lora_config` holds the `LoraConfig` kwargs (r, lora_alpha, target_modules) that
    diffusers then uses instead of guessing them from tensor shapes.
    """
    if not trigger_embeddings:
        raise ValueError("a personalized LoRA needs at least one trigger embedding")
    if list(trigger_embeddings) != spec.triggers:
        raise ValueError(f"the ModelSpec triggers {spec.triggers} differ from the embeddings' {list(trigger_embeddings)}")
    tensors = {UNET_PREFIX + k: v.detach().to("cpu", torch.float32).contiguous() for k, v in unet_lora_state_dict.items()}
    for trigger, embedding in trigger_embeddings.items():
        tensors[TRIGGER_KEY_PREFIX + trigger] = embedding.detach().to("cpu", torch.float32).reshape(-1, embedding.shape[-1]).contiguous()
    header = {"format": "pt", **spec.to_header()}
    if lora_config:
        header[LORA_ADAPTER_METADATA_KEY] = json.dumps({UNET_PREFIX + k: v for k, v in lora_config.items()}, sort_keys=True)

    return atomic_write(Path(path), save(tensors, metadata=header))


def read_model_spec(path: str | Path) -> ModelSpec:
    with safe_open(str(path), framework="pt") as f:
        return ModelSpec.from_header(f.metadata() or {})


def read_trigger_embeddings(path: str | Path) -> dict[str, torch.Tensor]:
    """Trigger -> embedding rows `(n_vectors, hidden)`, canonical trigger first, ready for `load_textual_inversion`."""
    with safe_open(str(path), framework="pt") as f:
        found = {k[len(TRIGGER_KEY_PREFIX):]: f.get_tensor(k) for k in f.keys() if k.startswith(TRIGGER_KEY_PREFIX)}  # noqa: SIM118 (safe_open is no dict)
        order = ModelSpec.from_header(f.metadata() or {}).triggers
    if not found:
        raise ValueError(f"{path} holds no trigger embedding (no '{TRIGGER_KEY_PREFIX}*' tensor): not a personalized LoRA")
    return {t: found[t] for t in sorted(found, key=lambda t: order.index(t) if t in order else len(order))}


def attach_personalized_lora(pipe, path: str | Path, adapter_name: str) -> list[str]:
    """Load the file's UNet LoRA as adapter `adapter_name` and its trigger tokens; return the triggers.

    A trigger already in the tokenizer (attached before, or shared by two versions) gets this file's
    embedding written over its row, since diffusers refuses to add a token twice.
    """
    embeddings = read_trigger_embeddings(path)
    pipe.load_lora_weights(str(path), adapter_name=adapter_name)
    vocab = pipe.tokenizer.get_vocab()
    fresh = {t: e for t, e in embeddings.items() if t not in vocab}
    if fresh:
        pipe.load_textual_inversion(list(fresh.values()), token=list(fresh), tokenizer=pipe.tokenizer, text_encoder=pipe.text_encoder)
    table = pipe.text_encoder.get_input_embeddings().weight
    with torch.no_grad():
        for trigger, embedding in embeddings.items():
            if trigger not in fresh:
                table[vocab[trigger]] = embedding[0].to(table.device, table.dtype)
    return list(embeddings)
