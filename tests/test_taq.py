"""TAQ on tiny random-weight SD 1.5 / SDXL pipelines: grids, protection, bits, bytes, save/load, LoRA."""

import copy
import math

import pytest
import torch

from personalq.random_pipelines import tiny_sd15_pipeline, tiny_sdxl_pipeline
from personalq.taq import (
    QuantConfig,
    calibration_prompts,
    find_trigger_spans,
    load_quantized,
    protection_kwargs,
    quantize,
    resident_weight_bytes,
    save_quantized,
    unet_bops,
)
from personalq.taq.activations import TAQCrossAttnProcessor
from personalq.taq.bops import dummy_unet_inputs, unet_macs
from personalq.taq.prompts import SLOTS, held_out_prompts, prompt_pools
from personalq.taq.quantizers import (
    affine_params,
    fake_quantize,
    log_params,
    quantize_log,
)
from personalq.taq.triggers import PROTECT_KWARG

PROMPT = "a <sks> dog sitting in the park"
CALIBRATION = calibration_prompts(2, trigger="<sks>")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def float_pipe():
    """One float pipeline, built once; tests deep-copy it rather than build their own."""
    return tiny_sd15_pipeline(0)


def quantized(pipe, setting, **config):
    return quantize(copy.deepcopy(pipe), QuantConfig.from_setting(setting, **config), calibration_prompts=CALIBRATION, num_inference_steps=2, batch_size=2)


@pytest.fixture(scope="module")
def w8a4(float_pipe):
    return quantized(float_pipe, "W8A4", protect="trigger+bos", quantizer="log")


def unet_call(pipe, inputs, mask=None):
    kwargs = {} if mask is None else {"cross_attention_kwargs": {PROTECT_KWARG: mask}}
    with torch.no_grad():
        return pipe.unet(**inputs, **kwargs).sample


# --- quantizers -------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_affine_grid_per_tensor_channel_and_row(bits):
    x = torch.randn(6, 10) * torch.linspace(0.1, 5, 6)[:, None]
    for axis in (None, 0, 1):
        xq = fake_quantize(x, bits, axis=axis)
        lo, hi = (x.min(), x.max()) if axis is None else (x.amin(1 - axis, keepdim=True), x.amax(1 - axis, keepdim=True))
        scale, zero = affine_params(lo, hi, bits)
        codes = xq / scale + zero
        assert torch.allclose(codes, codes.round(), atol=1e-3)
        assert codes.round().min() >= 0 and codes.round().max() <= 2**bits - 1
        assert (xq - x).abs().max() <= scale.max() / 2 + 1e-5
    # per-row scales really are per row: a small row keeps its detail next to a huge one
    rows = torch.stack([torch.linspace(-1, 1, 16), torch.linspace(-100, 100, 16)])
    per_row = fake_quantize(rows, 4, axis=0)
    per_tensor = fake_quantize(rows, 4)
    assert (per_row[0] - rows[0]).abs().max() < (per_tensor[0] - rows[0]).abs().max()


def test_log_quantizer_round_trip():
    bits, lo, hi = 4, math.log(1e-4), 0.0
    scale, zero = log_params(lo, hi, bits)
    levels = torch.exp(scale * (torch.arange(2**bits) - zero))
    exact = torch.cat([levels, -levels])
    assert torch.allclose(quantize_log(exact, scale, zero, bits), exact, rtol=1e-4, atol=1e-6)
    x = torch.rand(1000) * 0.9 + 0.05
    x = torch.cat([x, -x])
    xq = quantize_log(x, scale, zero, bits)
    assert torch.equal(torch.sign(xq), torch.sign(x))
    assert ((xq - x).abs() / x.abs()).max() <= math.exp(scale / 2) - 1 + 1e-4
    assert quantize_log(torch.zeros(3), scale, zero, bits).abs().max() < 1e-3
    # attention-like rows: the log grid keeps small probabilities that the affine grid zeroes
    probs = torch.softmax(torch.randn(64, 77) * 3, dim=-1)
    small = probs < 1e-3
    assert (fake_quantize(probs, 4, kind="log")[small] > 0).all()
    assert (fake_quantize(probs, 4)[small] == 0).all()


# --- triggers and per-call protection ---------------------------------------------------------


def test_trigger_spans_multi_token_and_several(float_pipe):
    tok = float_pipe.tokenizer
    spans = find_trigger_spans(tok, "a photo of <teddybear> and <sks>, then <sks> again", ["<teddybear>", "<sks>"])
    assert [s.trigger for s in spans] == ["<teddybear>", "<sks>", "<sks>"]
    teddy = spans[0]
    assert teddy.end - teddy.start > 2  # several sub-tokens, all covered
    for span in spans:
        text = "".join(span.tokens).replace("</w>", "")
        assert span.trigger in text  # the span decodes back to the trigger (plus glued punctuation)
    assert spans[1].end <= spans[2].start
    long_prompt = "dog " * 80 + "<sks>"
    assert find_trigger_spans(tok, long_prompt, ["<sks>"]) == []  # cut off at 77 tokens
    assert find_trigger_spans(tok, "a plain dog", ["<sks>"]) == []


def test_protection_masks_for_cfg_and_mixed_batches(w8a4):
    prompts = ["a <sks> dog", "a <teddybear> on the beach with a <sks> dog"]
    kwargs = protection_kwargs(w8a4, prompts, ["<sks>", "<teddybear>"], num_images_per_prompt=2)
    mask = kwargs[PROTECT_KWARG]
    assert mask.shape == (8, 77)
    # unconditional half: start token only (protect="trigger+bos" on this UNet)
    assert mask[:4, 0].all() and not mask[:4, 1:].any()
    for row, prompt in zip((4, 6), prompts):
        expected = torch.zeros(77, dtype=torch.bool)
        expected[0] = True
        for span in find_trigger_spans(w8a4.tokenizer, prompt, ["<sks>", "<teddybear>"]):
            expected[span.start : span.end] = True
        assert torch.equal(mask[row], expected) and torch.equal(mask[row + 1], expected)
    assert mask[6].sum() > mask[4].sum()  # the second prompt protects two spans
    plain = protection_kwargs(w8a4, prompts, ["<sks>"], protect="trigger")[PROTECT_KWARG]
    assert not plain[:2].any()  # without bos, the unconditional rows protect nothing


def test_unquantized_pipeline_gets_no_protection_kwargs(float_pipe):
    assert protection_kwargs(float_pipe, [PROMPT]) == {}


class Recorder:
    """Wraps one activation quantizer and keeps what went in, what was kept and what came out."""

    def __init__(self, quantizer):
        self.quantizer, self.calls = quantizer, []

    def __call__(self, x, keep=None):
        out = self.quantizer(x, keep)
        self.calls.append((x, keep, out))
        return out


def on_grid(values, quantizer):
    if quantizer.kind == "log":
        scale, zero = log_params(quantizer.lo, quantizer.hi, quantizer.bits)
        codes = torch.log(values.abs() + 1e-6) / scale + zero
    else:
        scale, zero = affine_params(quantizer.lo, quantizer.hi, quantizer.bits)
        codes = values / scale + zero
    return torch.allclose(codes, codes.round(), atol=2e-2) and codes.round().min() >= 0 and codes.round().max() <= 2**quantizer.bits - 1


def test_protected_rows_and_columns_are_exact_and_the_rest_on_grid(w8a4):
    unet = w8a4.unet
    attn = next(m for n, m in unet.named_modules() if n.endswith("attn2"))
    processor = attn.processor
    assert isinstance(processor, TAQCrossAttnProcessor)
    recorders = {p: Recorder(processor.quantizers[p]) for p in ("text", "k", "v", "a")}
    original = dict(processor.quantizers)
    processor.quantizers.update(recorders)
    try:
        inputs = dummy_unet_inputs(unet, batch=2, seed=3)
        mask = protection_kwargs(w8a4, [PROMPT], ["<sks>"])[PROTECT_KWARG]
        unet_call(w8a4, inputs, mask)
    finally:
        processor.quantizers.update(original)
    protected = mask  # [2, 77]: uncond row (BOS), cond row (BOS + trigger)
    assert protected[1].sum() > 2
    text = inputs["encoder_hidden_states"]
    for point in ("text", "k", "v"):
        x, keep, out = recorders[point].calls[0]
        rows = keep[..., 0]
        assert torch.equal(rows, protected)
        assert torch.equal(out[rows], x[rows])  # bit for bit
        assert not torch.equal(out[~rows], x[~rows])
        assert on_grid(out[~rows], recorders[point].quantizer)
    # K rows of the protected tokens are the full-precision projection of the raw text rows
    _, _, k_out = recorders["k"].calls[0]
    with torch.no_grad():
        k_full = attn.to_k(text)
    assert torch.equal(k_out[protected], k_full[protected])
    probs, keep, out = recorders["a"].calls[0]
    columns = keep.expand_as(probs)
    assert torch.equal(out[columns], probs[columns])
    assert on_grid(out[~columns], recorders["a"].quantizer)
    assert recorders["a"].quantizer.kind == "log"


def test_same_unet_serves_different_triggers_per_call(w8a4):
    inputs = dummy_unet_inputs(w8a4.unet, batch=2, seed=1)
    sks = protection_kwargs(w8a4, [PROMPT], ["<sks>"])[PROTECT_KWARG]
    teddy = protection_kwargs(w8a4, ["a <teddybear> in the park"], ["<teddybear>"])[PROTECT_KWARG]
    assert not torch.equal(sks, teddy)
    a, b = unet_call(w8a4, inputs, sks), unet_call(w8a4, inputs, teddy)
    assert not torch.equal(a, b)
    assert torch.equal(a, unet_call(w8a4, inputs, sks))  # nothing sticks between calls
    mixed = torch.cat([sks[1:], teddy[1:]])  # a batch of two different prompts
    out = unet_call(w8a4, inputs, mixed)
    assert torch.isfinite(out).all()
    with pytest.raises(ValueError, match="rows"):
        unet_call(w8a4, inputs, torch.zeros(3, 77, dtype=torch.bool))


def test_pipeline_runs_with_cfg_and_mixed_batch(w8a4):
    prompts = ["a <sks> dog", "a <teddybear> on the beach"]
    images = w8a4(prompts, num_inference_steps=2, num_images_per_prompt=2, generator=torch.Generator().manual_seed(0), output_type="np",
                  cross_attention_kwargs=protection_kwargs(w8a4, prompts, num_images_per_prompt=2)).images
    assert images.shape == (4, 32, 32, 3) and (images >= 0).all() and (images <= 1).all()


# --- bits, bytes, BOPs ------------------------------------------------------------------------


def test_output_error_grows_as_bits_fall(float_pipe):
    """Dynamic ranges keep this sweep cheap; the static path is covered by the tests above."""
    inputs = dummy_unet_inputs(float_pipe.unet, batch=1, seed=7)
    reference = unet_call(float_pipe, inputs)
    unprotected = torch.zeros(1, 77, dtype=torch.bool)
    errors = {}
    for w_bits, a_bits in ((8, 8), (4, 8), (4, 4), (8, 6), (8, 3)):
        pipe = quantize(copy.deepcopy(float_pipe), QuantConfig(w_bits=w_bits, a_bits=a_bits, protect="none", calibration="dynamic"))
        errors[f"W{w_bits}A{a_bits}"] = (unet_call(pipe, inputs, unprotected) - reference).pow(2).mean().item()
    assert 0 < errors["W8A8"] < errors["W4A8"] < errors["W4A4"]
    assert errors["W8A8"] < errors["W8A6"] < errors["W8A3"]


def test_resident_bytes_really_fall(float_pipe, w8a4):
    fp_layers = resident_weight_bytes(float_pipe.unet, layers_only=True)
    assert resident_weight_bytes(float_pipe.unet) == sum(p.numel() * 4 for p in float_pipe.unet.parameters())
    assert fp_layers / resident_weight_bytes(w8a4.unet, layers_only=True) >= 3.5
    w4 = quantized(float_pipe, "W4A8")
    assert fp_layers / resident_weight_bytes(w4.unet, layers_only=True) >= 6
    assert resident_weight_bytes(w4.unet) < resident_weight_bytes(w8a4.unet) < resident_weight_bytes(float_pipe.unet)
    # the stored weights are integer tensors, and the edge convolutions stay 8-bit
    assert w4.unet.conv_in.weight_qtype.bits == 8 and w4.unet.conv_out.weight_qtype.bits == 8
    assert w4.unet.down_blocks[0].resnets[0].conv1.weight_qtype.bits == 4


def test_bops_follow_the_bits(float_pipe, w8a4):
    records = unet_macs(float_pipe.unet)
    conv_in = next(r for r in records if r.name == "conv_in")
    c = float_pipe.unet.config
    assert conv_in.macs == c.block_out_channels[0] * c.sample_size**2 * c.in_channels * 9
    assert unet_bops(float_pipe.unet) == sum(r.macs for r in records) * 32 * 32
    w8 = {r.name: r for r in unet_macs(w8a4.unet)}
    assert (w8["conv_in"].bits_a, w8["conv_in"].bits_b) == (8, 4)
    cross = next(r for n, r in w8.items() if n.endswith("attn2"))
    assert (cross.bits_a, cross.bits_b) == (4, 4)
    assert unet_bops(w8a4.unet) < unet_bops(float_pipe.unet) / 4


# --- save / load, LoRA, SDXL, bad input -------------------------------------------------------


def test_save_and_reload_without_recalibration(float_pipe, w8a4, tmp_path, monkeypatch):
    save_quantized(w8a4, tmp_path / "q")
    from personalq.taq import pipeline

    monkeypatch.setattr(pipeline, "calibrate", lambda *a, **k: pytest.fail("load must not recalibrate"))
    reloaded = load_quantized(copy.deepcopy(float_pipe), tmp_path / "q")
    assert reloaded.unet.taq_state.config == w8a4.unet.taq_state.config
    assert reloaded.unet.taq_state.ranges() == w8a4.unet.taq_state.ranges()
    assert resident_weight_bytes(reloaded.unet) == resident_weight_bytes(w8a4.unet)
    inputs = dummy_unet_inputs(w8a4.unet, batch=2, seed=5)
    mask = protection_kwargs(w8a4, [PROMPT])[PROTECT_KWARG]
    assert torch.equal(unet_call(reloaded, inputs, mask), unet_call(w8a4, inputs, mask))
    with pytest.raises(FileNotFoundError, match="taq.json"):
        load_quantized(copy.deepcopy(float_pipe), tmp_path)


def _save_lora(pipe, directory, seed):
    from diffusers import StableDiffusionPipeline
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    unet = copy.deepcopy(pipe.unet)
    unet.add_adapter(LoraConfig(r=4, lora_alpha=4, target_modules=["to_q", "to_k", "to_v", "to_out.0"]))
    torch.manual_seed(seed)
    for name, param in unet.named_parameters():
        if "lora_" in name:
            param.data.normal_(0, 0.3)
    StableDiffusionPipeline.save_lora_weights(directory, unet_lora_layers=get_peft_model_state_dict(unet))


def test_lora_adapters_wrap_the_quantized_layers(float_pipe, tmp_path):
    pipe = quantize(copy.deepcopy(float_pipe), QuantConfig(w_bits=4, a_bits=8, calibration="dynamic"))
    _save_lora(float_pipe, tmp_path / "a", seed=1)
    _save_lora(float_pipe, tmp_path / "b", seed=2)
    inputs = dummy_unet_inputs(pipe.unet, batch=2, seed=2)
    mask = protection_kwargs(pipe, [PROMPT])[PROTECT_KWARG]
    base = unet_call(pipe, inputs, mask)
    pipe.load_lora_weights(tmp_path / "a", adapter_name="a")
    pipe.load_lora_weights(tmp_path / "b", adapter_name="b")
    to_q = pipe.unet.down_blocks[0].attentions[0].transformer_blocks[0].attn2.to_q
    assert to_q.base_layer.weight_qtype.bits == 4  # QLoRA-style: low-bit base ...
    assert to_q.lora_A["a"].weight.dtype == torch.float32  # ... full-precision adapter on top
    pipe.set_adapters("a")
    with_a = unet_call(pipe, inputs, mask)
    pipe.set_adapters("b")
    with_b = unet_call(pipe, inputs, mask)
    assert not torch.equal(with_a, base) and not torch.equal(with_a, with_b)
    pipe.disable_lora()
    assert torch.equal(unet_call(pipe, inputs, mask), base)
    pipe.enable_lora()
    pipe.set_adapters("a")
    assert torch.equal(unet_call(pipe, inputs, mask), with_a)


def test_sdxl_tiny_pipeline():
    pipe = tiny_sdxl_pipeline(0)
    quantize(pipe, QuantConfig.from_setting("W8A8"), calibration_prompts=CALIBRATION[:1], num_inference_steps=1)
    kwargs = protection_kwargs(pipe, [PROMPT])
    assert kwargs[PROTECT_KWARG].shape == (2, 77) and kwargs[PROTECT_KWARG][1].any()
    image = pipe(PROMPT, num_inference_steps=2, generator=torch.Generator().manual_seed(0), output_type="np", cross_attention_kwargs=kwargs).images
    assert image.shape == (1, 32, 32, 3) and torch.isfinite(torch.from_numpy(image)).all()
    assert any(isinstance(m.processor, TAQCrossAttnProcessor) for n, m in pipe.unet.named_modules() if n.endswith("attn2"))
    assert unet_bops(pipe.unet) > 0


def test_dynamic_calibration_needs_no_prompts(float_pipe):
    pipe = quantize(copy.deepcopy(float_pipe), QuantConfig(w_bits=8, a_bits=8, calibration="dynamic"))
    assert all(q.mode == "dynamic" and q.lo is None for q in pipe.unet.taq_state.quantizers.values())
    inputs = dummy_unet_inputs(pipe.unet, batch=2, seed=0)
    assert torch.isfinite(unet_call(pipe, inputs, protection_kwargs(pipe, [PROMPT])[PROTECT_KWARG])).all()


def test_bad_input_gets_a_one_line_reason(w8a4):
    for kwargs in (dict(w_bits=3), dict(a_bits=1), dict(quantizer="cubic"), dict(protect="all"), dict(calibration="late")):
        with pytest.raises(ValueError) as error:
            QuantConfig(**kwargs)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="W3A3"):
        QuantConfig.from_setting("W3A3")
    assert QuantConfig.from_setting("w4a8").name == "W4A8"
    with pytest.raises(ValueError, match="already quantized"):
        quantize(w8a4, QuantConfig())


def test_calibration_prompts_are_seeded_distinct_and_disjoint_from_held_out():
    pools = prompt_pools()
    assert [len(pools["calibration"][s]) for s in SLOTS] == [16, 8, 13, 12]
    prompts = calibration_prompts()
    assert len(prompts) == 64 == len(set(prompts)) and prompts == calibration_prompts()
    assert prompts != calibration_prompts(seed=1)
    assert all(p.startswith("a photo of a <sks> dog, ") for p in prompts)
    for slot in SLOTS:
        assert not set(pools["calibration"][slot]) & set(pools["held_out"][slot])
    held = held_out_prompts(16, trigger="<bear-v4>", class_noun="teddy bear")
    calib_values = {v for s in SLOTS for v in pools["calibration"][s]}
    assert all(not any(v in p for v in calib_values) for p in held)
    with pytest.raises(ValueError):
        calibration_prompts(n=0)


def test_quantize_a_pipeline_that_already_has_adapters(float_pipe, tmp_path):
    pipe = copy.deepcopy(float_pipe)
    _save_lora(float_pipe, tmp_path / "a", seed=3)
    pipe.load_lora_weights(tmp_path / "a", adapter_name="a")
    quantize(pipe, QuantConfig(w_bits=8, a_bits=8, calibration="dynamic"))
    to_k = pipe.unet.down_blocks[0].attentions[0].transformer_blocks[0].attn2.to_k
    assert to_k.base_layer.weight_qtype.bits == 8 and to_k.lora_B["a"].weight.dtype == torch.float32
    assert not any(".lora_" in name for name in pipe.unet.taq_state.quantizers)
    inputs = dummy_unet_inputs(pipe.unet, batch=2, seed=4)
    mask = protection_kwargs(pipe, [PROMPT])[PROTECT_KWARG]
    with_lora = unet_call(pipe, inputs, mask)
    pipe.disable_lora()
    assert not torch.equal(unet_call(pipe, inputs, mask), with_lora)
    with pytest.raises(ValueError, match="unload the LoRA"):
        save_quantized(pipe, tmp_path / "q")


def test_float16_setting_saves_and_loads(float_pipe, tmp_path):
    pipe = quantize(copy.deepcopy(float_pipe), QuantConfig.from_setting("FP16"))
    assert resident_weight_bytes(pipe.unet) * 2 == resident_weight_bytes(float_pipe.unet)
    save_quantized(pipe, tmp_path / "fp16")
    loaded = load_quantized(copy.deepcopy(float_pipe), tmp_path / "fp16")
    assert loaded.unet.dtype == torch.float16 and loaded.text_encoder.dtype == torch.float16
    assert all(torch.equal(a, b) for a, b in zip(pipe.unet.state_dict().values(), loaded.unet.state_dict().values()))
    assert protection_kwargs(loaded, [PROMPT])[PROTECT_KWARG].shape == (2, 77)  # same call signature as any setting
