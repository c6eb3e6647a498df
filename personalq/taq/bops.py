"""Multiply-accumulates and bit-operations of one UNet call, counted from the live modules.

BOPs = sum over every multiply of (bits of one operand) x (bits of the other): Linear/Conv2d layers
pair their stored weight bits with the bits of their (possibly quantized) input; the attention
matmuls QK^T and AV pair the bits of their two activation operands. Counting hooks run one real
forward at the model's native latent size, so the shapes are the model's, not a formula's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from diffusers.models.attention_processor import Attention

from personalq.taq.activations import TAQCrossAttnProcessor, quantized_layers
from personalq.taq.weights import weight_bits


@dataclass(frozen=True)
class LayerMACs:
    name: str
    kind: str  # "linear", "conv", "attention"
    macs: int
    bits_a: int  # first operand: the weight (layers) or Q / A (attention matmuls)
    bits_b: int  # second operand: the input activation, or K / V

    @property
    def bops(self) -> int:
        return self.macs * self.bits_a * self.bits_b


def dummy_unet_inputs(unet, batch: int = 1, sample_size: int | None = None, seq_len: int = 77, seed: int = 0) -> dict:
    """Seeded random inputs of the right shapes for one call, including SDXL's added text/time conditioning."""
    cfg = unet.config
    size = sample_size or cfg.sample_size
    device, dtype = unet.device, unet.dtype
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)

    inputs = dict(
        sample=randn(batch, cfg.in_channels, size, size),
        timestep=torch.tensor([500] * batch, device=device),
        encoder_hidden_states=randn(batch, seq_len, cfg.cross_attention_dim),
    )
    if cfg.addition_embed_type == "text_time":
        time_ids = 6
        text_dim = cfg.projection_class_embeddings_input_dim - time_ids * cfg.addition_time_embed_dim
        inputs["added_cond_kwargs"] = dict(text_embeds=randn(batch, text_dim), time_ids=randn(batch, time_ids))
    return inputs


def _activation_bits(state, name: str, float_bits: int) -> int:
    if state is None:
        return float_bits
    attn, _, proj = name.rpartition(".")
    quantizer = state.quantizers.get(name) or (state.quantizers.get(f"{attn}:text") if proj in ("to_k", "to_v") else None)
    return quantizer.bits if quantizer is not None and quantizer.mode != "off" else float_bits


def unet_macs(unet, batch: int = 1, sample_size: int | None = None, seq_len: int = 77) -> list[LayerMACs]:
    """Per-layer MACs and operand bits of one UNet call at `sample_size` latents (default: native)."""
    state = getattr(unet, "taq_state", None)
    records: list[LayerMACs] = []
    handles = []

    def layer_hook(name):
        def hook(module, args, output):
            float_bits = args[0].element_size() * 8
            if isinstance(module, torch.nn.Conv2d):
                per_output = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
                kind = "conv"
            else:
                per_output, kind = module.in_features, "linear"
            records.append(LayerMACs(name, kind, output.numel() * per_output, weight_bits(module), _activation_bits(state, name, float_bits)))

        return hook

    def attention_hook(name):
        def hook(module, args, kwargs, output):
            hidden = args[0] if args else kwargs["hidden_states"]
            context = kwargs.get("encoder_hidden_states", args[1] if len(args) > 1 else None)
            queries = hidden.shape[1] if hidden.ndim == 3 else hidden.shape[2] * hidden.shape[3]
            keys = queries if context is None else context.shape[1]
            bits = hidden.element_size() * 8
            processor = module.processor
            if isinstance(processor, TAQCrossAttnProcessor) and processor.quantizers["a"].mode != "off":
                bits = processor.quantizers["a"].bits
            macs = 2 * hidden.shape[0] * queries * keys * module.inner_dim
            records.append(LayerMACs(name, "attention", macs, bits, bits))

        return hook

    for name, module in quantized_layers(unet):
        handles.append(module.register_forward_hook(layer_hook(name)))
    for name, module in unet.named_modules():
        if isinstance(module, Attention):
            handles.append(module.register_forward_hook(attention_hook(name), with_kwargs=True))
    try:
        with torch.no_grad():
            unet(**dummy_unet_inputs(unet, batch, sample_size, seq_len))
    finally:
        for handle in handles:
            handle.remove()
    return records


def unet_bops(unet, batch: int = 1, sample_size: int | None = None, seq_len: int = 77) -> int:
    """Bit-operations (MACs x b_w x b_a, summed) of one UNet call at the model's native resolution."""
    return sum(record.bops for record in unet_macs(unet, batch, sample_size, seq_len))
