"""Write a diffusers SD 1.5 / SDXL pipeline as ONE original-layout (LDM) `.safetensors`, for tests.

Most users download Stable Diffusion as a single file with the original CompVis/Stability key names,
which serving reads with diffusers' `from_single_file`. No real checkpoint can be downloaded here and
diffusers only converts original -> diffusers, never back, so this module is a hand-written reverse of
`diffusers.loaders.single_file_utils` (`convert_ldm_unet_checkpoint`, `convert_ldm_vae_checkpoint`,
`convert_ldm_clip_checkpoint`, `convert_open_clip_checkpoint`), reusing its `DIFFUSERS_TO_LDM_MAPPING`.
It lets the tests write the tiny random pipelines in the layout users have. Test-only; the tests prove
it by a round trip (pipeline -> file -> `from_single_file` -> the very same tensors).
"""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers.loaders.single_file_utils import DIFFUSERS_TO_LDM_MAPPING, LDM_UNET_KEY

VAE_PREFIX = "first_stage_model."
SD15_CLIP_PREFIX = "cond_stage_model.transformer."
SDXL_CLIP_PREFIX = "conditioner.embedders.0.transformer."
SDXL_OPEN_CLIP_PREFIX = "conditioner.embedders.1.model."

# The module renames diffusers' converters undo, inverted (diffusers name -> original name).
UNET_RESNET_NAMES = {
    "norm1": "in_layers.0",
    "conv1": "in_layers.2",
    "norm2": "out_layers.0",
    "conv2": "out_layers.3",
    "time_emb_proj": "emb_layers.1",
    "conv_shortcut": "skip_connection",
}
VAE_RESNET_NAMES = {"conv_shortcut": "nin_shortcut"}
VAE_ATTENTION_NAMES = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out.0": "proj_out"}


def _rename(state: dict[str, torch.Tensor], prefixes: dict[str, tuple[str, dict[str, str]]], fixed: dict[str, str]) -> dict[str, torch.Tensor]:
    """Map every key through `fixed` (whole keys) or the one module prefix it starts with; unmapped keys fail."""
    out = {}
    for key, tensor in state.items():
        if key in fixed:
            out[fixed[key]] = tensor
            continue
        matches = [p for p in prefixes if key.startswith(p)]
        if len(matches) != 1:
            raise KeyError(f"no single original name for {key!r} (prefixes matched: {matches})")
        prefix = matches[0]
        new_prefix, inner_names = prefixes[prefix]
        rest = key[len(prefix):]
        for old, new in inner_names.items():
            if rest.startswith(old + "."):
                rest = new + rest[len(old):]
                break
        out[new_prefix + rest] = tensor
    return out


def unet_to_original(state: dict[str, torch.Tensor], config) -> dict[str, torch.Tensor]:
    """UNet2DConditionModel keys -> `input_blocks` / `middle_block` / `output_blocks` (no prefix)."""
    layers = config["layers_per_block"]
    if not isinstance(layers, int):
        raise NotImplementedError("per-block layers_per_block: the original layout has one count")
    fixed = dict(DIFFUSERS_TO_LDM_MAPPING["unet"]["layers"])
    if config.get("addition_embed_type") == "text_time":
        fixed.update(DIFFUSERS_TO_LDM_MAPPING["unet"]["addition_embed_type"])
    if config.get("class_embed_type") in ("timestep", "projection"):
        fixed.update(DIFFUSERS_TO_LDM_MAPPING["unet"]["class_embed_type"])

    prefixes: dict[str, tuple[str, dict[str, str]]] = {}
    down_types, up_types = config["down_block_types"], config["up_block_types"]
    for block, kind in enumerate(down_types):
        for layer in range(layers):
            i = 1 + block * (layers + 1) + layer  # input_blocks.0 is conv_in
            prefixes[f"down_blocks.{block}.resnets.{layer}."] = (f"input_blocks.{i}.0.", UNET_RESNET_NAMES)
            if "CrossAttn" in kind:
                prefixes[f"down_blocks.{block}.attentions.{layer}."] = (f"input_blocks.{i}.1.", {})
        if block < len(down_types) - 1:
            i = 1 + block * (layers + 1) + layers
            prefixes[f"down_blocks.{block}.downsamplers.0.conv."] = (f"input_blocks.{i}.0.op.", {})
    prefixes["mid_block.resnets.0."] = ("middle_block.0.", UNET_RESNET_NAMES)
    prefixes["mid_block.attentions.0."] = ("middle_block.1.", {})
    prefixes["mid_block.resnets.1."] = ("middle_block.2.", UNET_RESNET_NAMES)
    for block, kind in enumerate(up_types):
        attention = "CrossAttn" in kind
        for layer in range(layers + 1):
            i = block * (layers + 1) + layer
            prefixes[f"up_blocks.{block}.resnets.{layer}."] = (f"output_blocks.{i}.0.", UNET_RESNET_NAMES)
            if attention:
                prefixes[f"up_blocks.{block}.attentions.{layer}."] = (f"output_blocks.{i}.1.", {})
        if block < len(up_types) - 1:  # the upsampler follows the last layer's resnet (and attention)
            i = block * (layers + 1) + layers
            prefixes[f"up_blocks.{block}.upsamplers.0.conv."] = (f"output_blocks.{i}.{2 if attention else 1}.conv.", {})
    return _rename(state, prefixes, fixed)


def vae_to_original(state: dict[str, torch.Tensor], config) -> dict[str, torch.Tensor]:
    """AutoencoderKL keys -> `encoder.down.*` / `decoder.up.*` (reversed order) / `mid.attn_1` as 1x1 convs."""
    fixed = dict(DIFFUSERS_TO_LDM_MAPPING["vae"])
    prefixes: dict[str, tuple[str, dict[str, str]]] = {}
    layers = config["layers_per_block"]
    down, up = len(config["down_block_types"]), len(config["up_block_types"])
    for block in range(down):
        for layer in range(layers):
            prefixes[f"encoder.down_blocks.{block}.resnets.{layer}."] = (f"encoder.down.{block}.block.{layer}.", VAE_RESNET_NAMES)
        if block < down - 1:
            prefixes[f"encoder.down_blocks.{block}.downsamplers.0.conv."] = (f"encoder.down.{block}.downsample.conv.", {})
    for block in range(up):
        original = up - 1 - block  # the original decoder counts its up blocks from the lowest resolution's end
        for layer in range(layers + 1):
            prefixes[f"decoder.up_blocks.{block}.resnets.{layer}."] = (f"decoder.up.{original}.block.{layer}.", VAE_RESNET_NAMES)
        if block < up - 1:
            prefixes[f"decoder.up_blocks.{block}.upsamplers.0.conv."] = (f"decoder.up.{original}.upsample.conv.", {})
    for part in ("encoder", "decoder"):
        for n in (0, 1):
            prefixes[f"{part}.mid_block.resnets.{n}."] = (f"{part}.mid.block_{n + 1}.", VAE_RESNET_NAMES)
        prefixes[f"{part}.mid_block.attentions.0."] = (f"{part}.mid.attn_1.", VAE_ATTENTION_NAMES)
    out = _rename(state, prefixes, fixed)
    for key, tensor in out.items():  # the original mid-block attention projects with 1x1 convs
        if ".mid.attn_1." in key and key.rsplit(".", 2)[-2] in ("q", "k", "v", "proj_out") and key.endswith(".weight"):
            out[key] = tensor[:, :, None, None]
    return out


def clip_to_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """CLIPTextModel keys -> the HF `text_model.*` names the originals keep (transformers >= 5.6 drops the prefix)."""
    return {(key if key.startswith("text_model.") else "text_model." + key): tensor for key, tensor in state.items()}


def open_clip_to_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """CLIPTextModelWithProjection keys -> OpenCLIP's: fused q/k/v `in_proj_*`, `positional_embedding`, `text_projection` (x @ P)."""
    state = {(key if key.startswith(("text_model.", "text_projection.")) else "text_model." + key): t for key, t in state.items()}
    out = {}
    for diffusers_key, original in DIFFUSERS_TO_LDM_MAPPING["openclip"]["layers"].items():
        tensor = state.pop(diffusers_key)
        out[original] = tensor.T if original == "text_projection" else tensor
    renames = [(d, o) for d, o in DIFFUSERS_TO_LDM_MAPPING["openclip"]["transformer"].items() if not d.startswith("transformer.")]
    qkv: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        if not key.startswith("text_model.encoder.layers."):
            raise KeyError(f"no OpenCLIP name for {key!r}")
        for name in ("q_proj", "k_proj", "v_proj"):
            marker = f".self_attn.{name}."
            if marker in key:
                layer, kind = key.split(marker)
                qkv.setdefault(f"{layer}.self_attn.in_proj_{kind}", {})[name] = tensor
                break
        else:
            for diffusers_part, original_part in renames:
                key = key.replace(diffusers_part, original_part)
            out["transformer." + key] = tensor
    for key, parts in qkv.items():
        for diffusers_part, original_part in renames:
            key = key.replace(diffusers_part, original_part)
        out["transformer." + key] = torch.cat([parts["q_proj"], parts["k_proj"], parts["v_proj"]])
    return out


def to_original_state_dict(pipe) -> dict[str, torch.Tensor]:
    """One original-layout state dict holding the pipeline's UNet, VAE and text encoder(s)."""
    sdxl = getattr(pipe, "text_encoder_2", None) is not None
    parts = [
        (LDM_UNET_KEY, unet_to_original(pipe.unet.state_dict(), pipe.unet.config)),
        (VAE_PREFIX, vae_to_original(pipe.vae.state_dict(), pipe.vae.config)),
    ]
    if sdxl:
        parts.append((SDXL_CLIP_PREFIX, clip_to_original(pipe.text_encoder.state_dict())))
        parts.append((SDXL_OPEN_CLIP_PREFIX, open_clip_to_original(pipe.text_encoder_2.state_dict())))
    else:
        parts.append((SD15_CLIP_PREFIX, clip_to_original(pipe.text_encoder.state_dict())))
    out = {}
    for prefix, state in parts:
        for key, tensor in state.items():
            out[prefix + key] = tensor.detach().to("cpu").clone().contiguous()
    return out


def write_single_file(pipe, path: str | Path) -> Path:
    """Save the pipeline's weights as one original-layout `.safetensors` (no configs, as users get them)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(to_original_state_dict(pipe), str(path))
    return path
