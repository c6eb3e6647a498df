"""Low-bit weight storage: optimum-quanto on CPU, bitsandbytes + quanto on CUDA, and measuring what is resident.

The weights must really shrink in memory, not be rounded copies in fp32: quanto replaces each
Linear/Conv2d with a module holding int8 (qint8) or packed int4/int2 data plus scales. bitsandbytes
has no Conv2d, so on CUDA its int8 / NF4 Linear layers sit beside quanto convolutions.
"""

from __future__ import annotations

import torch

from personalq.taq.activations import quantized_layers

EDGE_LAYERS = ("conv_in", "conv_out")
"""The first and last convolution keep 8-bit weights at W4/W2: they touch the latents directly and
hold a negligible share of the parameters (4 -> 320 and 320 -> 4 channels in SD 1.5)."""


BACKENDS = ("quanto", "bitsandbytes")
"""quanto: every Linear/Conv2d in optimum-quanto's qint8/qint4 (CPU; the int8 ones then run oneDNN kernels).
bitsandbytes (the CUDA default): Linear layers in bitsandbytes int8 (LLM.int8) or NF4, convolutions in quanto's
qint8/qint4, since bitsandbytes has no convolution; so convolutions shrink too (they are about half of SD 1.5)."""


def _quanto_type(bits: int):
    from optimum.quanto import qint2, qint4, qint8

    return {8: qint8, 4: qint4, 2: qint2}[bits]


def default_backend(unet) -> str:
    return "bitsandbytes" if next(unet.parameters()).device.type == "cuda" else "quanto"


def quantize_weights(unet, w_bits: int, backend: str | None = None) -> None:
    """Store every Linear/Conv2d weight of `unet` in `w_bits` (in place); LoRA adapter layers stay float."""
    backend = backend or default_backend(unet)
    if backend not in BACKENDS:
        raise ValueError(f"unknown weight backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    convs = None
    if backend == "bitsandbytes":
        _linears_to_bnb(unet, w_bits)
        convs = [name for name, m in unet.named_modules() if type(m) is torch.nn.Conv2d and ".lora_" not in name]
    _quanto(unet, w_bits, convs)


def _quanto(unet, w_bits: int, only: list[str] | None) -> None:
    """optimum-quanto for the layers named in `only` (all Linear/Conv2d for None); edge convolutions keep 8 bits."""
    from optimum.quanto import freeze
    from optimum.quanto import quantize as quanto_quantize

    lora = ["*lora_*"]
    if w_bits == 8:
        quanto_quantize(unet, weights=_quanto_type(8), include=only, exclude=lora)
    else:
        narrow = None if only is None else [n for n in only if n not in EDGE_LAYERS]
        quanto_quantize(unet, weights=_quanto_type(w_bits), include=narrow, exclude=[*EDGE_LAYERS, *lora])
        quanto_quantize(unet, weights=_quanto_type(8), include=list(EDGE_LAYERS))
    freeze(unet)


def _bnb_linear(module: torch.nn.Linear, bits: int):
    """A bitsandbytes twin of `module`, quantized when it moves to its device (int8 rows + scales, or NF4 blocks)."""
    import bitsandbytes as bnb

    if bits not in (8, 4):
        raise ValueError(f"bitsandbytes stores 8 or 4-bit weights, not {bits}")
    bias = module.bias is not None
    if bits == 8:
        new = bnb.nn.Linear8bitLt(module.in_features, module.out_features, bias=bias, has_fp16_weights=False)
        new.weight = bnb.nn.Int8Params(module.weight.data.cpu(), requires_grad=False, has_fp16_weights=False)
    else:
        new = bnb.nn.Linear4bit(module.in_features, module.out_features, bias=bias, compute_dtype=module.weight.dtype, quant_type="nf4")
        new.weight = bnb.nn.Params4bit(module.weight.data.cpu(), requires_grad=False, quant_type="nf4")
    if bias:
        new.bias = torch.nn.Parameter(module.bias.data.cpu(), requires_grad=False)
    return new


def _set_module(root, name: str, module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, child, module)


def _linears_to_bnb(unet, w_bits: int) -> None:
    device = next(unet.parameters()).device
    for name, module in list(unet.named_modules()):
        if type(module) is torch.nn.Linear and ".lora_" not in name:
            _set_module(unet, name, _bnb_linear(module, w_bits).to(device))


def bnb_layers(unet) -> dict[str, int]:
    """Name -> bits of every bitsandbytes layer, as saved in taq.json."""
    return {name: weight_bits(m) for name, m in unet.named_modules() if type(m).__name__ in ("Linear8bitLt", "Linear4bit")}


def set_aside_bnb_layers(unet, layers: dict[str, int]) -> dict[str, torch.nn.Linear]:
    """Take the (meta) Linear shells of saved bitsandbytes layers out of `unet`, so loading the rest never
    materializes their full-precision weights; `load_bnb_layers` puts the low-bit layers in their place."""
    shells = {name: unet.get_submodule(name) for name in layers}
    for name in layers:
        _set_module(unet, name, torch.nn.Identity())
    return shells


def load_bnb_layers(unet, layers: dict[str, int], shells: dict, state_dict: dict, device) -> None:
    """Put saved bitsandbytes layers into `unet`: their int8/NF4 state goes straight in."""
    import bitsandbytes as bnb

    for name, bits in layers.items():
        prefix = f"{name}."
        own = {k.removeprefix(prefix): v for k, v in state_dict.items() if k.startswith(prefix)}
        shell = shells[name]
        bias = "bias" in own
        if bits == 8:
            layer = bnb.nn.Linear8bitLt(shell.in_features, shell.out_features, bias=bias, has_fp16_weights=False)
            layer = layer.to(device)  # quantizes its placeholder; the saved int8 rows and scales replace it below
            layer.load_state_dict(own)
        else:
            layer = bnb.nn.Linear4bit(shell.in_features, shell.out_features, bias=bias, compute_dtype=own["bias"].dtype if bias else torch.float16, quant_type="nf4")
            stats = {k.removeprefix("weight."): v for k, v in own.items() if k.startswith("weight.")}
            layer.weight = bnb.nn.Params4bit.from_prequantized(own["weight"], stats, requires_grad=False, device=device)
            if bias:
                layer.bias = torch.nn.Parameter(own["bias"].to(device), requires_grad=False)
        _set_module(unet, name, layer)


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
