"""SmoothQuant-style activation smoothing: move activation outliers into the weights before quantizing.

A few input channels of a Linear carry most of its activation range, so a per-tensor activation grid
wastes its levels on them. SmoothQuant (Xiao et al., 2023) divides input channel j by
s_j = max|x_j|^alpha / max|W_:,j|^(1 - alpha) and multiplies the weight column by s_j: the product is
unchanged in float, the activation is flatter, the weight (quantized per output channel) absorbs it.
Here the division is a forward pre-hook on the layer (SmoothQuant folds it into the preceding norm;
the arithmetic is the same), registered before TAQ's input quantizer so the quantizer sees x / s.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from personalq.taq.activations import cross_attention_layers, quantized_layers

SCALE_FLOOR = 1e-5


class _ChannelMax:
    """Pre-hook that records max |x| per input channel (last dimension) over calibration calls."""

    def __init__(self):
        self.value: torch.Tensor | None = None

    def __call__(self, module, args):
        x = args[0].detach().abs().flatten(0, -2).amax(dim=0).float()
        self.value = x if self.value is None else torch.maximum(self.value, x)


class _DivideChannels:
    """Pre-hook: the layer sees x / s along the input channels."""

    def __init__(self, scale: torch.Tensor):
        self.scale = scale

    def __call__(self, module, args):
        return (args[0] / self.scale.to(args[0].dtype), *args[1:])


def smoothable_layers(unet) -> dict[str, torch.nn.Linear]:
    """Linear layers whose input TAQ quantizes per tensor: every Linear except cross-attention's K/V of the
    text (their rows are protected per token, and the text is shared by all of them)."""
    kv = {id(proj) for attn in cross_attention_layers(unet).values() for proj in (attn.to_k, attn.to_v)}
    return {name: m for name, m in quantized_layers(unet) if isinstance(m, torch.nn.Linear) and id(m) not in kv}


def smoothing_scales(act_max: torch.Tensor, weight: torch.Tensor, alpha: float) -> torch.Tensor:
    """s_j = max|x_j|^alpha / max_i |W_ij|^(1 - alpha), floored so that dead channels do not divide by zero."""
    w_max = weight.detach().abs().amax(dim=0).float().clamp(min=SCALE_FLOOR)
    return (act_max.clamp(min=SCALE_FLOOR) ** alpha / w_max ** (1 - alpha)).clamp(min=SCALE_FLOOR)


def smooth_weights(unet, alpha: float, run_calibration: Callable[[], None]) -> dict[str, torch.Tensor]:
    """Measure per-channel input maxima with `run_calibration` (float UNet) and fold the scales into the
    weights; returns layer name -> scale for `divide_inputs`. Call before weight quantization."""
    layers = smoothable_layers(unet)
    recorders = {name: _ChannelMax() for name in layers}
    handles = [layers[name].register_forward_pre_hook(rec) for name, rec in recorders.items()]
    try:
        run_calibration()
    finally:
        for handle in handles:
            handle.remove()
    scales = {}
    for name, layer in layers.items():
        if recorders[name].value is not None:
            scales[name] = smoothing_scales(recorders[name].value, layer.weight, alpha)
            with torch.no_grad():
                layer.weight.mul_(scales[name].to(layer.weight.dtype))
    return scales


def divide_inputs(unet, scales: dict[str, torch.Tensor]) -> None:
    """Hook x / s onto the layers `smooth_weights` scaled. Call after weight quantization (quanto replaces the
    layer objects, and their hooks with them) and before TAQ's input quantizers are installed."""
    layers = dict(quantized_layers(unet))
    for name, scale in scales.items():
        layers[name].register_forward_pre_hook(_DivideChannels(scale))
