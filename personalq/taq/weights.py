"""Low-bit weight storage: optimum-quanto on CPU, bitsandbytes on CUDA, and measuring what is resident.

The weights must really shrink in memory, not be rounded copies in fp32: quanto replaces each
Linear/Conv2d with a module holding int8 (qint8) or packed int4/int2 data plus scales, and computes
with it directly. bitsandbytes only runs on CUDA (diffusers refuses it elsewhere) and has no Conv2d,
so on CUDA the Linear layers go to int8 / NF4 and convolutions keep the pipeline's float dtype.
"""

from __future__ import annotations

import torch

from personalq.taq.activations import quantized_layers

EDGE_LAYERS = ("conv_in", "conv_out")
"""The first and last convolution keep 8-bit weights at W4/W2: they touch the latents directly and
hold a negligible share of the parameters (4 -> 320 and 320 -> 4 channels in SD 1.5)."""


def _quanto_type(bits: int):
    from optimum.quanto import qint2, qint4, qint8

    return {8: qint8, 4: qint4, 2: qint2}[bits]


def quantize_weights(unet, w_bits: int) -> None:
    """Store every Linear/Conv2d weight of `unet` in `w_bits` (in place); LoRA adapter layers stay float."""
    if next(unet.parameters()).device.type == "cuda":
        _quantize_weights_bnb(unet, w_bits)
        return
    from optimum.quanto import freeze
    from optimum.quanto import quantize as quanto_quantize

    lora = ["*lora_*"]
    if w_bits == 8:
        quanto_quantize(unet, weights=_quanto_type(8), exclude=lora)
    else:
        quanto_quantize(unet, weights=_quanto_type(w_bits), exclude=[*EDGE_LAYERS, *lora])
        quanto_quantize(unet, weights=_quanto_type(8), include=list(EDGE_LAYERS))
    freeze(unet)


def _quantize_weights_bnb(unet, w_bits: int) -> None:
    """CUDA only: Linear layers to bitsandbytes int8 (LLM.int8) or NF4. Not exercised on CPU CI."""
    import bitsandbytes as bnb

    if w_bits not in (8, 4):
        raise ValueError(f"bitsandbytes stores 8 or 4-bit weights, not {w_bits}")
    device = next(unet.parameters()).device
    for name, module in list(unet.named_modules()):
        if type(module) is not torch.nn.Linear or ".lora_" in name:
            continue
        weight = module.weight.data.cpu()
        if w_bits == 8:
            new = bnb.nn.Linear8bitLt(module.in_features, module.out_features, bias=module.bias is not None, has_fp16_weights=False, threshold=6.0)
            new.weight = bnb.nn.Int8Params(weight, requires_grad=False, has_fp16_weights=False)
        else:
            new = bnb.nn.Linear4bit(module.in_features, module.out_features, bias=module.bias is not None, compute_dtype=weight.dtype, quant_type="nf4")
            new.weight = bnb.nn.Params4bit(weight, requires_grad=False, quant_type="nf4")
        if module.bias is not None:
            new.bias = torch.nn.Parameter(module.bias.data.cpu(), requires_grad=False)
        parent_name, _, child = name.rpartition(".")
        setattr(unet.get_submodule(parent_name) if parent_name else unet, child, new.to(device))


def weight_bits(module) -> int:
    """Bits per stored weight of one layer: the quanto/bitsandbytes type, else the float dtype."""
    qtype = getattr(module, "weight_qtype", None)
    if qtype is not None:
        return qtype.bits
    weight = module.weight
    if type(weight).__name__ == "Params4bit":
        return 4
    return weight.element_size() * 8


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes a tensor keeps resident, looking inside quantized tensor subclasses (data + scales + shifts)."""
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if flatten is not None:
        names, _ = flatten()
        return sum(tensor_bytes(getattr(tensor, name)) for name in names)
    return tensor.numel() * tensor.element_size()


def resident_weight_bytes(unet, layers_only: bool = False) -> int:
    """Bytes of the UNet's live parameters and buffers; `layers_only` counts just its Linear/Conv layers."""
    if layers_only:
        tensors = [t for _, m in quantized_layers(unet) for t in (*m.parameters(recurse=False), *m.buffers(recurse=False))]
    else:
        tensors = [*unet.parameters(), *unet.buffers()]
    seen, total = set(), 0
    for tensor in tensors:
        if id(tensor) not in seen:
            seen.add(id(tensor))
            total += tensor_bytes(tensor)
    return total
