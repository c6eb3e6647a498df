"""Validation of a checkpoint's tensors against the base model it names, before anything is written.

A LoRA whose shapes do not fit its base used to be accepted at upload and fail at render time (and
take the shared base down with it); a textual inversion of arbitrary tensors, or a LoRA full of NaN,
was accepted too. Here, at upload and import:

- every tensor is finite;
- a LoRA's keys, read the way serving reads them (diffusers' `lora_state_dict`, which also converts
  kohya and PEFT names), must be UNet LoRA pairs on modules of the base with matching shapes, or
  trigger embeddings as wide as the text encoder (serving attaches UNet LoRAs only);
- a textual inversion is what serving loads (one tensor, or `clip_l` + `clip_g`) of 1-75 vectors as
  wide as the base's text encoder(s);
- a DreamBooth UNet must load strictly into the base's UNet: the same keys and shapes, after
  diffusers' conversion from the original (LDM) layout where the file uses it.

The first mismatch is named in the one-line refusal. What the validator knows about a base comes from
a `BaseShapes` provider: `pq-nano` (and any diffusers folder) from the folder's UNet header and text
encoder config, SD 1.5 and SDXL from their UNet configs built on the meta device (no weights, no
memory). A base without a provider gets the checks that need no base: finite tensors, well-formed
LoRA pairs and one width per textual inversion.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personalq.config import ASSETS_DIR
from personalq.diffusers_import import DIFFUSERS_IMPORT
from personalq.protocols import BaseShapes
from personalq.store.errors import WeightsRefused

MAX_EMBEDDING_VECTORS = 75
_FLOAT_DTYPES = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")
# diffusers' LoRA names for one module's pair, after `lora_state_dict`:
_LORA_KEY = re.compile(
    r"^(?P<module>.+?)(?:\.lora\.(?P<a>down|up)\.weight|\.lora_(?P<b>A|B)\.weight|\.processor\.(?P<proj>to_[qkv]|to_out)_lora\.(?P<c>down|up)\.weight)$"
)


@dataclass(frozen=True)
class FolderShapes:
    """A diffusers folder (`unet/`, `text_encoder*/`): shapes from the UNet file's header, widths from configs."""

    name: str
    folder: Path

    def unet_shapes(self) -> Mapping[str, tuple[int, ...]]:
        return _header_shapes(self.folder / "unet" / "diffusion_pytorch_model.safetensors")

    def unet_config(self) -> dict[str, Any]:
        return json.loads((self.folder / "unet" / "config.json").read_text())

    def text_widths(self) -> Mapping[str, int]:
        widths = {}
        for encoder in ("text_encoder", "text_encoder_2"):
            config = self.folder / encoder / "config.json"
            if config.is_file():
                widths[encoder] = int(json.loads(config.read_text())["hidden_size"])
        return widths


@dataclass(frozen=True)
class ConfigShapes:
    """A base known by its UNet config: the UNet is built on the meta device to read its shapes."""

    name: str
    config: tuple[tuple[str, Any], ...]
    widths: tuple[tuple[str, int], ...]

    def unet_shapes(self) -> Mapping[str, tuple[int, ...]]:
        return _meta_unet(self.config)[0]

    def unet_config(self) -> dict[str, Any]:
        return _meta_unet(self.config)[1]

    def text_widths(self) -> Mapping[str, int]:
        return dict(self.widths)


@functools.lru_cache(maxsize=8)
def _header_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    from personalq.store.safetensors_file import read_header

    return {name: shape for name, (_, shape) in read_header(path).tensors.items()}


@functools.lru_cache(maxsize=8)
def _meta_unet(config: tuple[tuple[str, Any], ...]) -> tuple[dict[str, tuple[int, ...]], dict[str, Any]]:
    import torch
    with DIFFUSERS_IMPORT:
        from diffusers import UNet2DConditionModel

    with torch.device("meta"):
        unet = UNet2DConditionModel(**dict(config))
    return {k: tuple(v.shape) for k, v in unet.state_dict().items()}, dict(unet.config)


def _frozen(mapping: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in mapping.items())


def _sdxl_unet_config() -> dict[str, Any]:
    """stabilityai/stable-diffusion-xl-base-1.0's UNet config (the keys that differ from diffusers' defaults)."""
    return dict(
        sample_size=128, in_channels=4, out_channels=4, layers_per_block=2,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        block_out_channels=(320, 640, 1280), transformer_layers_per_block=(1, 2, 10), attention_head_dim=(5, 10, 20),
        cross_attention_dim=2048, use_linear_projection=True, addition_embed_type="text_time",
        addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816,
    )


def _default_bases() -> dict[str, BaseShapes]:
    from personalq.random_pipelines import SD15_UNET_CONFIG

    return {
        "pq-nano": FolderShapes("pq-nano", ASSETS_DIR / "pq-nano"),
        "sd15": ConfigShapes("sd15", _frozen(SD15_UNET_CONFIG), (("text_encoder", 768),)),
        "sdxl": ConfigShapes("sdxl", _frozen(_sdxl_unet_config()), (("text_encoder", 768), ("text_encoder_2", 1280))),
    }


_BASES: dict[str, BaseShapes] = {}


def _known_bases() -> dict[str, BaseShapes]:
    if not _BASES:
        _BASES.update(_default_bases())
    return _BASES


def register_base(shapes: BaseShapes) -> None:
    """Teach validation a base model (e.g. a user's diffusers folder as `FolderShapes`)."""
    _known_bases()[shapes.name] = shapes  # the shipped ones stay known beside it


def base_shapes(name: str | None) -> BaseShapes | None:
    return _known_bases().get(name) if name else None


def served_bases(base_model: str | Path | None) -> dict[str, BaseShapes]:
    """The base a server actually loads, when it is a local diffusers folder, under its family's name:
    serving accepts any checkpoint of the family ("sd15", "sdxl"), so uploads are checked against the
    model that will run them, not the standard architecture of that family."""
    folder = Path(str(base_model)).expanduser() if base_model else None
    if folder is None or not (folder / "unet" / "config.json").is_file():
        return {}
    try:
        pipeline = json.loads((folder / "model_index.json").read_text()).get("_class_name", "")
    except (OSError, ValueError):
        pipeline = ""
    family = "sdxl" if "XL" in pipeline else "sd15"
    return {family: FolderShapes(family, folder)}


# ---------------------------------------------------------------- the checks


def validate_weights(
    path: Path, tensors: Mapping[str, tuple[str, tuple[int, ...]]], kind: str | None, shapes_of_base: BaseShapes | None
) -> None:
    """Raise `WeightsRefused` naming the first tensor that is not finite or does not fit the base."""
    path = Path(path)
    shapes = {name: tuple(shape) for name, (_, shape) in tensors.items()}
    if not shapes:
        raise WeightsRefused(f"{path.name}: holds no tensors")
    if kind == "lora":
        _check_lora(path, shapes, shapes_of_base)
    elif kind == "textual_inversion":
        _check_textual_inversion(path.name, shapes, shapes_of_base)
    elif kind == "dreambooth":
        _check_dreambooth(path.name, shapes, shapes_of_base)
    _check_finite(path, [name for name, (dtype, _) in tensors.items() if dtype in _FLOAT_DTYPES])


def _check_finite(path: Path, names: list[str]) -> None:
    import torch
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        for name in names:
            tensor = handle.get_tensor(name)
            if tensor.numel() and not bool(torch.isfinite(tensor.float() if tensor.dtype.itemsize == 1 else tensor).all()):
                raise WeightsRefused(f"{path.name}: tensor {name!r} holds NaN or infinite values")


def _lora_pairs(path: Path, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Serving's view of the LoRA: diffusers' `lora_state_dict` over meta tensors of the file's shapes."""
    import torch
    with DIFFUSERS_IMPORT:
        from diffusers import StableDiffusionPipeline

    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:  # scalars (kohya's alphas) are read: diffusers calls .item()
        meta = {
            name: handle.get_tensor(name) if len(shape) == 0 or max(shape) <= 1 else torch.empty(shape, device="meta")
            for name, shape in shapes.items()
        }
    try:
        state, _ = StableDiffusionPipeline.lora_state_dict(meta)
    except Exception as error:  # diffusers raises ValueError/KeyError/IndexError on names it cannot convert
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise WeightsRefused(f"{path.name}: not a LoRA serving can read ({reason[:200]})") from None
    return {name: tuple(tensor.shape) for name, tensor in state.items()}


def _check_lora(path: Path, shapes: dict[str, tuple[int, ...]], base: BaseShapes | None) -> None:
    from personalq.personalize.lora_file import TRIGGER_KEY_PREFIX

    converted = _lora_pairs(path, shapes)
    widths = base.text_widths() if base is not None else {}
    unet = base.unet_shapes() if base is not None else None
    where = f" of the base {base.name}" if base is not None else ""
    pairs: dict[str, dict[str, tuple[int, ...]]] = {}
    for name, shape in converted.items():
        if name.startswith(TRIGGER_KEY_PREFIX):
            if len(shape) != 2 or not 1 <= shape[0] <= MAX_EMBEDDING_VECTORS:
                raise WeightsRefused(f"{path.name}: trigger embedding {name!r} has shape {shape}, expected (vectors, width)")
            if widths and shape[1] != widths.get("text_encoder"):
                raise WeightsRefused(f"{path.name}: trigger embedding {name!r} is {shape[1]} wide but the text encoder{where} is {widths['text_encoder']}")
            continue
        if name.startswith(("text_encoder.", "text_encoder_2.")):
            raise WeightsRefused(f"{path.name}: {name!r} is a text-encoder LoRA layer; serving attaches UNet LoRAs only")
        if name.endswith(".alpha"):
            continue
        match = _LORA_KEY.match(name.removeprefix("unet."))
        if not name.startswith("unet.") or match is None:
            raise WeightsRefused(f"{path.name}: {name!r} is not a UNet LoRA weight serving can attach")
        module = match["module"] + (f".{match['proj']}" + (".0" if match["proj"] == "to_out" else "") if match["proj"] else "")
        role = "down" if (match["a"] or match["c"]) == "down" or match["b"] == "A" else "up"
        pairs.setdefault(module, {})[role] = shape
    if not pairs:
        raise WeightsRefused(f"{path.name}: holds no UNet LoRA weights")
    for module, pair in pairs.items():
        if set(pair) != {"down", "up"}:
            raise WeightsRefused(f"{path.name}: LoRA on {module!r} has a {next(iter(pair))} weight without its pair")
        down, up = pair["down"], pair["up"]
        if len(down) < 2 or len(up) < 2 or down[0] != up[1]:
            raise WeightsRefused(f"{path.name}: LoRA on {module!r} has mismatched ranks: down {down}, up {up}")
        if unet is None:
            continue
        weight = unet.get(f"{module}.weight")
        if weight is None:
            raise WeightsRefused(f"{path.name}: LoRA targets {module!r}, which the base {base.name} does not have")
        if down[1] != weight[1] or up[0] != weight[0]:
            raise WeightsRefused(
                f"{path.name}: LoRA on {module!r} maps {down[1]} -> {up[0]} but the base {base.name}'s module maps {weight[1]} -> {weight[0]}"
            )


def _check_textual_inversion(name: str, shapes: dict[str, tuple[int, ...]], base: BaseShapes | None) -> None:
    if "clip_l" in shapes or "clip_g" in shapes:
        if not {"clip_l", "clip_g"} <= set(shapes):
            raise WeightsRefused(f"{name}: an SDXL textual inversion needs both clip_l and clip_g")
        embeddings = {"text_encoder": shapes["clip_l"], "text_encoder_2": shapes["clip_g"]}
    elif len(shapes) == 1:
        embeddings = {"text_encoder": next(iter(shapes.values()))}
    else:
        raise WeightsRefused(f"{name}: holds {len(shapes)} tensors; a textual inversion is one embedding (or clip_l + clip_g)")
    widths = base.text_widths() if base is not None else {}
    for encoder, shape in embeddings.items():
        vectors = shape[0] if len(shape) == 2 else 1
        if len(shape) not in (1, 2) or not 1 <= vectors <= MAX_EMBEDDING_VECTORS or shape[-1] < 1:
            raise WeightsRefused(f"{name}: embedding for {encoder} has shape {shape}; expected 1-{MAX_EMBEDDING_VECTORS} vectors")
        if widths and shape[-1] != widths.get(encoder):
            expected = widths.get(encoder)
            raise WeightsRefused(f"{name}: embedding for {encoder} is {shape[-1]} wide but the base {base.name}'s is {expected}")


def _check_dreambooth(name: str, shapes: dict[str, tuple[int, ...]], base: BaseShapes | None) -> None:
    if base is None:
        return
    if any(key.startswith("model.diffusion_model.") for key in shapes):
        unet = _converted_ldm_unet(name, shapes, base)
    else:
        unet = {}
        for key, shape in shapes.items():
            prefix, _, rest = key.partition(".")
            if prefix not in ("unet", "text_encoder", "text_encoder_2", "vae"):
                unet[key] = shape
            elif prefix == "unet":
                unet[rest] = shape
    expected = base.unet_shapes()
    for key, shape in unet.items():
        if key not in expected:
            raise WeightsRefused(f"{name}: UNet weight {key!r} does not exist in the base {base.name}")
        if tuple(shape) != tuple(expected[key]):
            raise WeightsRefused(f"{name}: UNet weight {key!r} is {tuple(shape)} but the base {base.name}'s is {tuple(expected[key])}")
    missing = [key for key in expected if key not in unet]
    if missing:
        raise WeightsRefused(f"{name}: the UNet does not load into the base {base.name}: {len(missing)} weights missing, first {missing[0]!r}")


def _converted_ldm_unet(name: str, shapes: dict[str, tuple[int, ...]], base: BaseShapes) -> dict[str, tuple[int, ...]]:
    import torch
    with DIFFUSERS_IMPORT:
        from diffusers.loaders.single_file_utils import convert_ldm_unet_checkpoint

    meta = {key: torch.empty(shape, device="meta") for key, shape in shapes.items() if key.startswith("model.diffusion_model.")}
    try:
        converted = convert_ldm_unet_checkpoint(meta, base.unet_config())
    except Exception as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise WeightsRefused(f"{name}: the UNet cannot be converted to the base {base.name}'s layout ({reason[:200]})") from None
    return {key: tuple(tensor.shape) for key, tensor in converted.items()}
