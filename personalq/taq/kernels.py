"""Real int8 compute on CPU: Linear and Conv2d layers as uint8 x int8 -> int32 products in oneDNN.

TAQ calibrates an affine a-bit grid for every layer input (`ActivationQuantizer`) and stores weights
as symmetric per-output-channel int8 (optimum-quanto's qint8). Rounding the input onto that grid and
multiplying integers is exactly what the fake-quantized reference computes in float, so the layers
here swap the float product for oneDNN's integer kernels (`onednn::qlinear_pointwise`,
`onednn::qconv2d_pointwise`, the ones torch's x86 inductor quantization lowers to; VNNI/AMX where the
CPU has them). Weights are packed into the kernel's layout once, when the layer is made; the packed
tensor is the only copy kept. The layers subclass `nn.Linear`/`nn.Conv2d` so peft can still wrap them
with LoRA adapters (the adapter branch sees the float input, as it does in the reference).

Cross-attention's K/V projections of the text and the attention products keep the reference path:
their protected rows and columns must stay full precision, and they are a tiny share of the work.
"""

from __future__ import annotations

import threading
import warnings

import torch
from optimum.quanto import qint8

from personalq.taq.activations import _InputQuantizerHook
from personalq.taq.quantizers import REUSE_MAX_ELEMENTS, ActivationQuantizer


_SYMMETRIC = torch.zeros(1, dtype=torch.int64)
"""The weights' zero point: int8 weights are symmetric, one zero serves every channel."""


def cpu_int8_available() -> bool:
    """Whether this torch build has oneDNN's quantized kernels (x86 builds do)."""
    return hasattr(torch.ops.onednn, "qlinear_pointwise") and hasattr(torch.ops.onednn, "qconv2d_pointwise")


_last = threading.local()
"""Per thread, the last input quantized and its codes: Q, K and V of a self-attention read the same tensor on the same grid."""


def _quantize_input(x: torch.Tensor, scale: float, zero: int, bits: int) -> torch.Tensor:
    """uint8 codes of `x` on the grid: clip(round(x / scale) + zero, 0, 2^bits - 1).

    `quantize_per_tensor` is torch's one fused rounding op on CPU (deprecated only as a tensor type;
    the codes are taken out at once); it rounds x * (1/scale) half to even, as the static reference does.
    """
    key = (x, x._version, scale, zero, bits)
    last = getattr(_last, "key", None)
    if last is not None and last[0] is x and last[1:] == key[1:]:
        return _last.codes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        codes = torch.quantize_per_tensor(x.float(), scale, zero, torch.quint8).int_repr()
    codes = codes if bits == 8 else codes.clamp_(0, 2**bits - 1)
    _last.key, _last.codes = key, codes
    return codes


class _Int8Layer:
    """What both layers share: the input quantizer, per-channel weight scales, the quanto-format state dict."""

    def _init_int8(self, weight_scale: torch.Tensor, bias: torch.Tensor | None, quantizer: ActivationQuantizer) -> None:
        if quantizer.kind != "linear" or quantizer.mode != "static" or quantizer.lo is None:
            raise ValueError("int8 kernels need a calibrated static affine input quantizer")
        self.quantizer = quantizer
        self.weight_qtype = qint8  # what `weights.weight_bits` and the saved quantization map read
        self.register_buffer("weight_scale", weight_scale.reshape(-1).float().contiguous())
        self.register_buffer("bias", None if bias is None else bias.detach().float().contiguous())

    def _float_weight(self) -> torch.Tensor:
        data = self._int8_weight()
        return data.float() * self.weight_scale.reshape(-1, *([1] * (data.ndim - 1)))

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """Saved as optimum-quanto's qint8 layout, so a saved variant loads on any device, with or without these kernels."""
        data = self._int8_weight()
        destination[prefix + "weight._data"] = data
        destination[prefix + "weight._scale"] = self.weight_scale.reshape(-1, *([1] * (data.ndim - 1))).clone()
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias
        destination[prefix + "input_scale"] = torch.ones(())
        destination[prefix + "output_scale"] = torch.ones(())


class Int8Linear(_Int8Layer, torch.nn.Linear):
    """y = (s_x (q_x - z_x)) (s_w q_w)^T + b with q_x uint8, q_w int8, the product accumulated in int32."""

    def __init__(self, weight_int8: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None, quantizer: ActivationQuantizer):
        torch.nn.Module.__init__(self)
        self.out_features, self.in_features = weight_int8.shape
        self.register_buffer("weight", torch.ops.onednn.qlinear_prepack(weight_int8.contiguous(), None))
        self._init_int8(weight_scale, bias, quantizer)

    def _int8_weight(self) -> torch.Tensor:
        return self.weight.to_dense().t().contiguous()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.quantizer.mode != "static":  # a study switched this point off or to dynamic ranges: the reference path
            return torch.nn.functional.linear(self.quantizer(x), self._float_weight().to(x.dtype), self.bias)
        scale, zero = self.quantizer.grid_numbers()
        codes = _quantize_input(x, scale, zero, self.quantizer.bits)
        return torch.ops.onednn.qlinear_pointwise(
            codes, scale, zero, self.weight, self.weight_scale, _SYMMETRIC, self.bias,
            1.0, 0, x.dtype, "none", [], "",
        )


class Int8Conv2d(_Int8Layer, torch.nn.Conv2d):
    """The convolution of uint8 input codes with int8 weights, int32 accumulation, float output."""

    def __init__(self, conv: torch.nn.Conv2d, weight_int8: torch.Tensor, weight_scale: torch.Tensor, quantizer: ActivationQuantizer):
        torch.nn.Module.__init__(self)
        for attr in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "padding_mode",
                     "transposed", "output_padding"):
            setattr(self, attr, getattr(conv, attr))
        if self.padding_mode != "zeros" or isinstance(self.padding, str):
            raise ValueError("int8 convolutions take explicit zero padding only")
        scale, zero = quantizer.grid_numbers()
        packed = torch.ops.onednn.qconv_prepack(weight_int8.contiguous(), weight_scale.reshape(-1).float(), scale, zero,
                                                list(self.stride), list(self.padding), list(self.dilation), self.groups, None)
        self.register_buffer("weight", packed)
        self._init_int8(weight_scale, conv.bias, quantizer)

    def _int8_weight(self) -> torch.Tensor:
        return self.weight.to_dense().contiguous()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.quantizer.mode != "static":  # a study switched this point off or to dynamic ranges: the reference path
            return self._conv_forward(self.quantizer(x), self._float_weight().to(x.dtype), self.bias)
        scale, zero = self.quantizer.grid_numbers()
        codes = _quantize_input(x, scale, zero, self.quantizer.bits)
        return torch.ops.onednn.qconv2d_pointwise(
            codes, scale, zero, self.weight, self.weight_scale, _SYMMETRIC, self.bias,
            list(self.stride), list(self.padding), list(self.dilation), self.groups, 1.0, 0, x.dtype, "none", [], "",
        )


class Int8WeightLinear(torch.nn.Linear):
    """A Linear with int8 weights and float input: for cross-attention's K/V projections of the text, whose
    protected rows must stay full precision. The weight is widened per call; it is small (text width x
    channels) and runs on a few dozen tokens, where optimum-quanto's own path costs ten times more."""

    def __init__(self, weight_int8: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None):
        torch.nn.Module.__init__(self)
        self.out_features, self.in_features = weight_int8.shape
        self.weight_qtype = qint8
        self.register_buffer("weight", weight_int8.contiguous())
        self._last: tuple | None = None  # (input, its version, output) of the last small call
        self.register_buffer("weight_scale", weight_scale.reshape(-1, 1).float().contiguous())
        self.register_buffer("bias", None if bias is None else bias.detach().float().contiguous())

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "weight._data"] = self.weight
        destination[prefix + "weight._scale"] = self.weight_scale
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias
        destination[prefix + "input_scale"] = torch.ones(())
        destination[prefix + "output_scale"] = torch.ones(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = self._last
        if last is not None and last[0] is x and last[1] == x._version:
            return last[2]  # the same text at every denoising step: its K/V once per image
        weight = self.weight.to(x.dtype).mul_(self.weight_scale.to(x.dtype))
        out = torch.nn.functional.linear(x, weight, None if self.bias is None else self.bias.to(x.dtype))
        if x.numel() <= REUSE_MAX_ELEMENTS:
            self._last = (x, x._version, out)
        return out


def int8_layer(module: torch.nn.Module, quantizer: ActivationQuantizer | None) -> torch.nn.Module | None:
    """The int8-kernel twin of a quanto qint8 Linear/Conv2d: integer products when its input `quantizer` is
    static affine, weight-only int8 for a Linear whose input is not quantized; None otherwise."""
    qtype = getattr(module, "weight_qtype", None)
    if qtype is None or qtype.bits != 8 or isinstance(module, (_Int8Layer, Int8WeightLinear)):
        return None
    data, scale = module.weight._data, module.weight._scale
    if quantizer is None:
        return Int8WeightLinear(data, scale, module.bias) if type(module).__name__ == "QLinear" else None
    if quantizer.kind != "linear" or quantizer.mode != "static" or quantizer.lo is None:
        return None
    if isinstance(module, torch.nn.Conv2d):
        if module.padding_mode != "zeros" or isinstance(module.padding, str):
            return None
        return Int8Conv2d(module, data, scale, quantizer)
    if isinstance(module, torch.nn.Linear):
        return Int8Linear(data, scale, module.bias, quantizer)
    return None


def use_int8_kernels(unet) -> int:
    """Swap every qint8 layer whose input TAQ quantizes statically for its int8-kernel twin; returns how many.

    The twin replaces the layer object, so the layer's input-quantizer hook goes with it (the twin
    quantizes its own input with the same quantizer, whose range stays in `unet.taq_state`).
    """
    if not cpu_int8_available() or next(unet.parameters()).device.type != "cpu":
        return 0
    swapped = 0
    for name, module in list(unet.named_modules()):
        hook = next((h for h in module._forward_pre_hooks.values() if isinstance(h, _InputQuantizerHook)), None)
        twin = int8_layer(module, None if hook is None else hook.quantizer)
        if twin is not None:
            parent, _, child = name.rpartition(".")
            setattr(unet.get_submodule(parent) if parent else unet, child, twin)
            swapped += 1
    return swapped


def int8_quantization_map(unet) -> dict[str, dict[str, str]]:
    """optimum-quanto's quantization map entries for the int8-kernel layers (saved in its qint8 layout)."""
    return {name: {"weights": "qint8", "activations": "none"} for name, m in unet.named_modules()
            if isinstance(m, (_Int8Layer, Int8WeightLinear))}
