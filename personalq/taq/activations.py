"""Activation quantization of a diffusers UNet: a-bit inputs for every Linear/Conv, and a
cross-attention processor that quantizes Q, K, V and A while keeping protected tokens exact.

Everything here is attached to the stock `UNet2DConditionModel`: forward pre-hooks on the layers and
diffusers attention processors, so LoRA adapters (peft wraps the same layer objects), SDXL and SD 1.5
keep working unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from diffusers.models.attention_processor import Attention, AttnProcessor2_0

from personalq.taq.config import QuantConfig
from personalq.taq.quantizers import ActivationQuantizer
from personalq.taq.triggers import PROTECT_KWARG

CROSS_POINTS = ("text", "q", "k", "v", "a")
"""Quantization points inside each cross-attention: text rows entering to_k/to_v, Q, K, V, probabilities A."""


def _protect_rows(mask: torch.Tensor | None, batch: int, tokens: int, device) -> torch.Tensor | None:
    """The per-call mask as [batch, tokens, 1], checked against the batch the UNet actually runs."""
    if mask is None:
        return None
    mask = torch.as_tensor(mask, dtype=torch.bool, device=device)
    if mask.ndim != 2:
        raise ValueError(f"{PROTECT_KWARG} must be [batch, tokens], got shape {tuple(mask.shape)}")
    if mask.shape[0] == 1 and batch > 1:
        mask = mask.expand(batch, -1)
    if mask.shape != (batch, tokens):
        raise ValueError(f"{PROTECT_KWARG} has shape {tuple(mask.shape)} but this call runs {batch} rows of {tokens} text tokens")
    return mask[:, :, None]


class TAQPassThroughProcessor(AttnProcessor2_0):
    """diffusers' SDPA attention that accepts (and ignores) the protection kwarg.

    Used for self-attention, and for cross-attention when activations stay in float, so that callers
    can pass the same `cross_attention_kwargs` whatever the setting.
    """

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, taq_protect=None, **kwargs):
        return super().__call__(attn, hidden_states, encoder_hidden_states, attention_mask, temb, **kwargs)


class TAQCrossAttnProcessor:
    """Cross-attention with Q, K, V and A on the a-bit grid, except the protected tokens.

    Protected tokens keep full precision along their whole pathway into the image: their rows of the
    text hidden states entering to_k/to_v, their rows of K and V, and their columns of
    A = softmax(QK^T / sqrt(d)). Which tokens are protected comes with each call (`taq_protect`).
    """

    def __init__(self, quantizers: dict[str, ActivationQuantizer]):
        self.quantizers = quantizers

    def __call__(self, attn: Attention, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, taq_protect=None, **kwargs):
        if encoder_hidden_states is None:
            raise ValueError("TAQCrossAttnProcessor is for cross-attention layers only")
        quant = self.quantizers
        residual = hidden_states
        if attn.spatial_norm is not None:
            hidden_states = attn.spatial_norm(hidden_states, temb)
        input_ndim = hidden_states.ndim
        if input_ndim == 4:
            batch, channel, height, width = hidden_states.shape
            hidden_states = hidden_states.view(batch, channel, height * width).transpose(1, 2)
        batch, _, _ = hidden_states.shape
        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, encoder_hidden_states.shape[1], batch)
        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        if attn.norm_cross:
            encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)

        rows = _protect_rows(taq_protect, batch, encoder_hidden_states.shape[1], hidden_states.device)
        query = quant["q"](attn.to_q(hidden_states))
        text = quant["text"](encoder_hidden_states, rows)
        key = quant["k"](attn.to_k(text), rows)
        value = quant["v"](attn.to_v(text), rows)

        query = attn.head_to_batch_dim(query)
        key = attn.head_to_batch_dim(key)
        value = attn.head_to_batch_dim(value)
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)

        probs = attn.get_attention_scores(query, key, attention_mask)
        columns = None if rows is None else rows.transpose(1, 2).repeat_interleave(attn.heads, dim=0)
        probs = quant["a"](probs, columns)
        hidden_states = attn.batch_to_head_dim(torch.bmm(probs, value))

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(batch, channel, height, width)
        if attn.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states / attn.rescale_output_factor


class _TimestepGroupHook:
    """UNet forward pre-hook: before each denoising call, every quantizer switches to the range of the call's
    timestep group (groups split [0, num_train_timesteps) evenly)."""

    def __init__(self, quantizers: list[ActivationQuantizer], groups: int, num_train_timesteps: int):
        self.quantizers, self.groups, self.num_train_timesteps = quantizers, groups, num_train_timesteps

    def group_of(self, timestep) -> int:
        t = float(torch.as_tensor(timestep).flatten()[0])
        return min(self.groups - 1, max(0, int(t * self.groups / self.num_train_timesteps)))

    def __call__(self, module, args, kwargs):
        timestep = args[1] if len(args) > 1 else kwargs["timestep"]
        group = self.group_of(timestep)
        for quantizer in self.quantizers:
            if quantizer.group != group:
                quantizer.select_group(group)


class _InputQuantizerHook:
    """Forward pre-hook: the layer sees its input on the a-bit grid (the "A" of WxAy)."""

    def __init__(self, quantizer: ActivationQuantizer):
        self.quantizer = quantizer

    def __call__(self, module, args):
        return (self.quantizer(args[0]), *args[1:])


@dataclass
class TAQState:
    """What `quantize` attached to a UNet: its config, every activation quantizer, the hook handles."""

    config: QuantConfig
    quantizers: dict[str, ActivationQuantizer] = field(default_factory=dict)
    handles: list = field(default_factory=list)
    original_processors: dict = field(default_factory=dict)

    def set_mode(self, mode: str) -> None:
        for quantizer in self.quantizers.values():
            quantizer.mode = mode
            if quantizer.group is not None:  # file the group being observed, then read it back under the new mode
                quantizer.select_group(quantizer.group)

    def ranges(self) -> dict[str, list]:
        return {name: [q.lo, q.hi] for name, q in self.quantizers.items()}


def cross_attention_layers(unet) -> dict[str, Attention]:
    return {name: m for name, m in unet.named_modules() if isinstance(m, Attention) and m.is_cross_attention}


def _layer_name(name: str) -> str:
    return name.replace(".base_layer", "")


def quantized_layers(unet):
    """(name, module) of every Linear/Conv2d the UNet runs, LoRA adapter layers excluded."""
    for name, module in unet.named_modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)) and ".lora_" not in name:
            yield _layer_name(name), module


def install_activation_quantizers(
    unet,
    config: QuantConfig,
    mode: str,
    points: tuple[str, ...] = CROSS_POINTS,
    layer_inputs: bool = True,
    num_train_timesteps: int = 1000,
) -> TAQState:
    """Attach a-bit quantizers to `unet` (replacing any earlier TAQ state) and return their state.

    `points` picks which cross-attention tensors are quantized (the token analyzer uses only K, V);
    `layer_inputs` adds the input quantizers of every other Linear/Conv. With `config.timestep_groups` > 1
    a UNet pre-hook switches every quantizer to its timestep group's range before each call.
    """
    remove_activation_quantizers(unet)
    state = TAQState(config, original_processors=dict(unet.attn_processors))
    cross = cross_attention_layers(unet)
    kv_layers = {id(layer) for attn in cross.values() for proj in (attn.to_k, attn.to_v) for layer in (proj, getattr(proj, "base_layer", None)) if layer is not None}

    def make(name: str, kind: str = "linear", active: bool = True) -> ActivationQuantizer:
        quantizer = ActivationQuantizer(config.a_bits, kind, mode if active else "off", clip_percentile=config.clip_percentile)
        if active:
            state.quantizers[name] = quantizer
        return quantizer

    processors = {}
    for key in unet.attn_processors:
        attn_name = key.rsplit(".processor", 1)[0]
        if attn_name in cross and points:
            qs = {p: make(f"{_layer_name(attn_name)}:{p}", config.quantizer if p == "a" else "linear", p in points) for p in CROSS_POINTS}
            processors[key] = TAQCrossAttnProcessor(qs)
        else:
            processors[key] = TAQPassThroughProcessor()
    unet.set_attn_processor(processors)  # diffusers empties this dict; it is not used afterwards

    if layer_inputs:
        for name, module in quantized_layers(unet):
            if id(module) not in kv_layers:
                state.handles.append(module.register_forward_pre_hook(_InputQuantizerHook(make(name))))
    if config.timestep_groups > 1:
        hook = _TimestepGroupHook(list(state.quantizers.values()), config.timestep_groups, num_train_timesteps)
        state.handles.append(unet.register_forward_pre_hook(hook, with_kwargs=True))
    unet.taq_state = state
    return state


def remove_activation_quantizers(unet) -> None:
    """Back to the attention processors and unhooked layers the UNet had before (weights stay as they are)."""
    state = getattr(unet, "taq_state", None)
    if state is None:
        return
    for handle in state.handles:
        handle.remove()
    unet.set_attn_processor(dict(state.original_processors))  # a copy: diffusers empties the dict it gets
    del unet.taq_state
