"""Reading each checkpoint kind from disk into what the manager keeps resident.

A payload is read once, then lives in the resident cache: switching to a checkpoint later copies
tensors already in memory instead of touching the disk (that is what the naive server pays for).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from personalq.diffusers_import import DIFFUSERS_IMPORT
from personalq.serving.requests import ServingError

UNET_KEY_PREFIX = "unet."
TEXT_ENCODER_KEY_PREFIXES = ("text_encoder.", "text_encoder_2.")


@dataclass
class LoraPayload:
    """A LoRA in diffusers' format, plus the trigger embeddings a personalized LoRA carries."""

    checkpoint_id: str
    unet_state_dict: dict[str, torch.Tensor]
    network_alphas: dict | None
    metadata: dict | None
    rank: int
    trigger_embeddings: dict[str, torch.Tensor] = field(default_factory=dict)
    peft_state_dict: dict[str, torch.Tensor] | None = None
    lora_config: Any = None

    def prepare_hotswap(self, adapter_name: str) -> bool:
        """Convert once to peft's keys and config so each later swap is a plain tensor copy.

        Needs the rank/alpha/targets header that personalized LoRAs carry (diffusers'
        `lora_adapter_metadata`); without it diffusers' slower loader must infer them per load.
        """
        if self.peft_state_dict is not None:
            return True
        header = {k.removeprefix(UNET_KEY_PREFIX): v for k, v in (self.metadata or {}).items() if k.startswith(UNET_KEY_PREFIX)}
        if not {"r", "lora_alpha", "target_modules"} <= set(header):
            return False
        with DIFFUSERS_IMPORT:
            from diffusers.utils import convert_unet_state_dict_to_peft
        from peft import LoraConfig

        peft_keys = convert_unet_state_dict_to_peft({k.removeprefix(UNET_KEY_PREFIX): v for k, v in self.unet_state_dict.items()})
        self.peft_state_dict = {
            (k[: -len(".weight")] + f".{adapter_name}.weight" if k.endswith(("lora_A.weight", "lora_B.weight")) else k): v
            for k, v in peft_keys.items()
        }
        self.lora_config = LoraConfig(**{k: header[k] for k in ("r", "lora_alpha", "target_modules")})
        return True


@dataclass
class DreamBoothPayload:
    """A full fine-tune: the components that replace the base's (None keeps the base's)."""

    checkpoint_id: str
    components: dict[str, Any]


@dataclass
class TextualInversionPayload:
    """Embeddings per text encoder ("text_encoder" and, for SDXL, "text_encoder_2")."""

    checkpoint_id: str
    embeddings: dict[str, torch.Tensor]


def _file_of(card) -> Path:
    if card.file_path is None:
        raise ServingError(f"checkpoint {card.id} has no file in the store")
    path = Path(card.file_path)
    if not path.exists():
        raise ServingError(f"checkpoint {card.id}: file {path} is missing")
    return path


def _finite(card, tensors: dict[str, torch.Tensor]) -> None:
    """A NaN or infinite weight renders a black or garbage image (quantizers even hide the NaN): refuse it."""
    bad = next((key for key, value in tensors.items() if value.is_floating_point() and not torch.isfinite(value).all()), None)
    if bad is not None:
        raise ServingError(f"checkpoint {card.id}: {bad} holds NaN or infinite values")


def _lora_rank(state_dict: dict[str, torch.Tensor]) -> int:
    ranks = [v.shape[0] for k, v in state_dict.items() if k.endswith(("lora.down.weight", "lora_A.weight"))]
    if not ranks:
        raise ServingError("holds no LoRA down/A weights for the UNet")
    return max(ranks)


def load_lora(card, pipe, device, dtype) -> LoraPayload:
    path = _file_of(card)
    state_dict, network_alphas, metadata = pipe.lora_state_dict(str(path), return_lora_metadata=True)
    if any(key.startswith(TEXT_ENCODER_KEY_PREFIXES) for key in state_dict):
        raise ServingError(f"checkpoint {card.id}: text-encoder LoRA layers cannot be hot-swapped; only UNet LoRAs are served")
    unet_state = {k: v.to(device, dtype) for k, v in state_dict.items() if k.startswith(UNET_KEY_PREFIX)}
    if not unet_state:
        raise ServingError(f"checkpoint {card.id}: no UNet LoRA weights in {path.name}")
    from personalq.personalize.lora_file import (
        TRIGGER_KEY_PREFIX,
        read_trigger_embeddings,
    )

    has_triggers = any(k.startswith(TRIGGER_KEY_PREFIX) for k in state_dict)
    embeddings = read_trigger_embeddings(path) if has_triggers else {}
    _finite(card, {**unet_state, **embeddings})
    return LoraPayload(
        checkpoint_id=card.id,
        unet_state_dict=unet_state,
        network_alphas=network_alphas,
        metadata=metadata,
        rank=_lora_rank(unet_state),
        trigger_embeddings={t: e.to(device, dtype) for t, e in embeddings.items()},
    )


def _pristine_copy(module):
    import copy

    clone = copy.deepcopy(module)
    if getattr(clone, "peft_config", None):
        clone.unload_lora()  # the base UNet may carry the LoRA slot; a full checkpoint replaces bare weights
    return clone


def _match_vocabulary(text_encoder, weights: dict[str, torch.Tensor]) -> None:
    """Size the copied encoder's token table like the file's (the base's holds the trigger slots too)."""
    table = text_encoder.get_input_embeddings().weight
    key = next(n for n, p in text_encoder.named_parameters() if p is table)
    if key in weights and weights[key].shape[0] != table.shape[0]:
        text_encoder.resize_token_embeddings(weights[key].shape[0], mean_resizing=False)


def load_dreambooth(card, pipe, device, dtype, single_file_config=None) -> DreamBoothPayload:
    """A full fine-tune as one `.safetensors` or a diffusers folder.

    The file is either an original (LDM) single-file checkpoint, read with `from_single_file`, or
    diffusers-format weights (`unet.*` / `text_encoder.*` keys, or bare UNet keys) loaded strictly
    into copies of the base's modules, which also proves it fits this base architecture.
    """
    path = _file_of(card)
    names = [n for n in ("unet", "text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2") if getattr(pipe, n, None) is not None]
    if path.is_file():
        from safetensors.torch import load_file

        state = load_file(str(path))
        _finite(card, state)
        if any(key.startswith("model.diffusion_model.") for key in state):
            if single_file_config is None:
                raise ServingError(f"checkpoint {card.id}: an original-layout checkpoint needs `single_file_config` (a local diffusers folder of this base)")
            full = type(pipe).from_single_file(str(path), config=str(single_file_config), dtype=dtype)
            components = {n: getattr(full, n) for n in ("unet", "text_encoder", "text_encoder_2") if n in names}
        else:
            parts: dict[str, dict[str, torch.Tensor]] = {}
            for key, tensor in state.items():
                prefix, _, rest = key.partition(".")
                if prefix in ("unet", "text_encoder", "text_encoder_2"):
                    parts.setdefault(prefix, {})[rest] = tensor
                else:
                    parts.setdefault("unet", {})[key] = tensor
            components = {}
            for name, part in parts.items():
                if name not in names:
                    raise ServingError(f"checkpoint {card.id}: has {name} weights but the base model has no {name}")
                module = _pristine_copy(getattr(pipe, name))
                if name != "unet":
                    _match_vocabulary(module, part)
                module.load_state_dict(part, strict=name == "unet")
                components[name] = module
    else:
        found = {n: path / n for n in names if (path / n).is_dir()}
        if "unet" not in found:
            raise ServingError(f"checkpoint {card.id}: {path} holds no unet/ folder")
        components = {}
        for name, folder in found.items():
            cls = type(getattr(pipe, name))
            if name.startswith("tokenizer"):
                components[name] = cls.from_pretrained(str(folder))
            elif name == "unet":
                components[name] = cls.from_pretrained(str(folder), dtype=dtype)
            else:
                components[name] = cls.from_pretrained(str(folder), dtype=dtype)
    for module in components.values():
        if isinstance(module, torch.nn.Module):
            module.to(device, dtype).eval().requires_grad_(False)
    return DreamBoothPayload(card.id, components)


def load_textual_inversion(card, pipe, device, dtype) -> TextualInversionPayload:
    """Diffusers (`{token: tensor}`), A1111 (`string_to_param`) and SDXL (`clip_l`/`clip_g`) embedding files."""
    path = _file_of(card)
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(path))
    else:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    if "string_to_param" in state:
        state = dict(state["string_to_param"])
    if "clip_l" in state or "clip_g" in state:
        embeddings = {"text_encoder": state["clip_l"], "text_encoder_2": state["clip_g"]}
    elif len(state) == 1:
        embeddings = {"text_encoder": next(iter(state.values()))}
    else:
        raise ServingError(f"checkpoint {card.id}: {path.name} holds {len(state)} tensors, expected one embedding")
    _finite(card, embeddings)
    return TextualInversionPayload(card.id, {k: v.to(device, dtype) for k, v in embeddings.items()})


LOADERS = {"lora": load_lora, "dreambooth": load_dreambooth, "textual_inversion": load_textual_inversion}
