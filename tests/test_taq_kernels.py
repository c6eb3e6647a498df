"""CPU int8 kernels: the W8A8 UNet computed with uint8 x int8 -> int32 products matches the
fake-quantized reference (same stored weights, same calibrated grids, same protected tokens)."""

import pytest
import torch

from personalq.random_pipelines import tiny_sd15_pipeline
from personalq.serving.cache import resident_bytes
from personalq.taq import QuantConfig, calibration_prompts, load_quantized, protection_kwargs, quantize, save_quantized
from personalq.taq.bops import dummy_unet_inputs
from personalq.taq.activations import _InputQuantizerHook
from personalq.taq.quantizers import ActivationQuantizer, affine_params, quantize_affine
from personalq.taq.kernels import Int8Conv2d, Int8Linear, Int8WeightLinear, cpu_int8_available, int8_layer, use_int8_kernels

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.skipif(not cpu_int8_available(), reason="this torch build has no oneDNN int8 kernels")]

PROMPT = "a <sks> dog sitting in the park"
LAYER_TOLERANCE = 1e-5
"""Per layer, on the same input: the integer product is exact and the codes are rounded as the
reference rounds them, so only float summation order differs (relative to the output's largest value)."""
UNET_TOLERANCE = 0.10
"""Whole UNet: a last-bit difference can move an input across a rounding midpoint of the next layer's
grid, and such flips spread, so the two paths are compared by their error against full precision:
the kernels' may exceed the reference's by at most 10% (max and mean absolute error)."""


def w8a8():
    """W8A8 with the trigger protected, fake-quantized (quanto int8 weights, float products); deterministic."""
    return quantize(tiny_sd15_pipeline(0), QuantConfig.from_setting("W8A8", protect="trigger"), calibration_prompts=calibration_prompts(2, trigger="<sks>"),
                    num_inference_steps=2, batch_size=2, int8_kernels=False)


def unet_out(pipe):
    inputs = dummy_unet_inputs(pipe.unet, batch=2)
    with torch.no_grad():
        return pipe.unet(**inputs, cross_attention_kwargs=protection_kwargs(pipe, [PROMPT])).sample  # accepted by any setting's UNet


@pytest.fixture(scope="module")
def reference():
    return w8a8()


def layer_input(module, quantizer):
    """Inputs spread over (and a little past) the layer's calibrated range."""
    shape = (2, module.in_channels, 6, 6) if isinstance(module, torch.nn.Conv2d) else (2, 5, module.in_features)
    span = quantizer.hi - quantizer.lo
    return torch.rand(shape, generator=torch.Generator().manual_seed(0)) * 1.2 * span + quantizer.lo - 0.1 * span


def test_each_int8_layer_equals_its_fake_quant_layer(reference):
    twins = 0
    for name, module in reference.unet.named_modules():
        hook = next((h for h in module._forward_pre_hooks.values() if isinstance(h, _InputQuantizerHook)), None)
        twin = None if hook is None else int8_layer(module, hook.quantizer)
        if twin is None:
            continue
        x = layer_input(module, hook.quantizer)
        with torch.no_grad():
            expected, got = module(x), twin(x)
        assert (got - expected).abs().max() <= LAYER_TOLERANCE * expected.abs().max(), name
        twins += 1
    assert twins >= 40


def test_int8_unet_is_as_close_to_full_precision_as_the_reference_with_the_trigger_protected(reference):
    kernels = w8a8()
    swapped = use_int8_kernels(kernels.unet)
    layers = [m for m in kernels.unet.modules() if isinstance(m, (Int8Linear, Int8Conv2d, Int8WeightLinear))]
    assert swapped == len(layers) and any(isinstance(m, Int8Conv2d) for m in layers) and any(isinstance(m, Int8Linear) for m in layers)
    cross = [a for a in kernels.unet.modules() if getattr(a, "is_cross_attention", False)]
    assert cross and all(isinstance(a.to_k, Int8WeightLinear) and isinstance(a.to_v, Int8WeightLinear) for a in cross), \
        "K/V of the text take float input (int8 weights), so protected rows stay full precision"
    assert all(isinstance(a.to_q, Int8Linear) for a in cross)
    full = unet_out(tiny_sd15_pipeline(0))
    ref_error, kernel_error = (unet_out(reference) - full).abs(), (unet_out(kernels) - full).abs()
    assert kernel_error.max() <= (1 + UNET_TOLERANCE) * ref_error.max()
    assert kernel_error.mean() <= (1 + UNET_TOLERANCE) * ref_error.mean()


def test_int8_layers_hold_one_byte_per_weight_and_save_and_load_the_same(reference, tmp_path):
    pipe = w8a8()
    before = resident_bytes(pipe.unet)
    use_int8_kernels(pipe.unet)
    assert resident_bytes(pipe.unet) <= before, "the packed weights replace quanto's int8 data, never add to it"
    expected = unet_out(pipe)
    save_quantized(pipe, tmp_path / "w8a8")
    loaded = load_quantized(tiny_sd15_pipeline(0), tmp_path / "w8a8")
    assert any(isinstance(m, Int8Conv2d) for m in loaded.unet.modules()), "loading packs the weights for the kernels again"
    assert torch.equal(unet_out(loaded), expected)


@pytest.mark.parametrize("bits", [8, 4])
def test_static_fast_path_rounds_onto_the_same_grid_as_quantize_affine(bits):
    quantizer = ActivationQuantizer(bits, mode="static", lo=-1.3, hi=2.1)
    x = torch.randn(4, 64, 32, generator=torch.Generator().manual_seed(1)) * 1.5
    reference = quantize_affine(x, *affine_params(-1.3, 2.1, bits), bits)
    scale = float(affine_params(-1.3, 2.1, bits)[0])
    fast = quantizer(x)
    assert (fast - reference).abs().max() <= scale * 1.001, "at most one code apart, on a rounding midpoint"
    assert (fast != reference).float().mean() < 1e-3
    assert len(torch.unique(fast)) <= 2**bits


def test_a_point_switched_off_or_dynamic_takes_the_reference_path(reference):
    """Studies (bench layers) switch quantization points off or to dynamic ranges after quantizing."""
    kernels = w8a8()
    use_int8_kernels(kernels.unet)
    for pipe in (reference, kernels):
        pipe.unet.taq_state.set_mode("off")
    try:
        assert torch.allclose(unet_out(kernels), unet_out(reference), rtol=1e-4, atol=1e-5)
    finally:
        reference.unet.taq_state.set_mode("static")


def test_the_same_text_is_quantized_once_and_a_new_range_or_mask_is_not_served_stale():
    quantizer = ActivationQuantizer(8, mode="static", lo=-1.0, hi=1.0)
    text = torch.randn(2, 7, 16)
    keep = torch.zeros(2, 7, 1, dtype=torch.bool)
    first = quantizer(text, keep)
    assert quantizer(text, keep.clone()) is first, "the same text and protection: the same result, not a new one"
    keep[0, 3] = True
    assert torch.equal(quantizer(text, keep)[0, 3], text[0, 3]), "a new protected row is kept exact"
    quantizer.lo, quantizer.hi = -2.0, 2.0
    assert torch.equal(quantizer(text, keep), quantize_affine(text, *affine_params(-2.0, 2.0, 8), 8).where(~keep, text))
    text.mul_(2)  # changed in place: recomputed
    assert torch.equal(quantizer(text, keep), quantize_affine(text, *affine_params(-2.0, 2.0, 8), 8).where(~keep, text))
