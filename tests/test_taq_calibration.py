"""Calibration: percentile clipping, and TAQ protection changing the calibrated ranges of the quantized rest."""

import copy

import pytest
import torch

from personalq.random_pipelines import tiny_sd15_pipeline
from personalq.taq import QuantConfig, calibration_prompts, quantize
from personalq.taq.quantizers import ActivationQuantizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_percentile_clipping_drops_outliers_that_min_max_keeps():
    x = torch.linspace(-1.0, 1.0, 10_001)
    x[0], x[-1] = -50.0, 80.0  # two outliers among ten thousand
    minmax, clipped = ActivationQuantizer(8, mode="observe"), ActivationQuantizer(8, mode="observe", clip_percentile=99.9)
    minmax(x)
    clipped(x)
    assert (minmax.lo, minmax.hi) == (-50.0, 80.0)
    assert -1.0 <= clipped.lo < -0.99 and 0.99 < clipped.hi <= 1.0


def test_clipped_ranges_average_over_calls_and_skip_protected_entries():
    q = ActivationQuantizer(8, mode="observe", clip_percentile=99.0)
    rows = torch.cat([torch.full((1, 100), 40.0), torch.linspace(-1.0, 1.0, 100).repeat(3, 1)])
    keep = torch.tensor([True, False, False, False])[:, None]
    q(rows, keep)
    q(2 * rows, keep)
    assert q.hi == pytest.approx(1.5 * 0.98, abs=0.02)  # mean of ~1 and ~2, the protected 40s never seen
    with pytest.raises(ValueError):
        ActivationQuantizer(8, clip_percentile=40.0)


@pytest.fixture(scope="module")
def float_pipe():
    return tiny_sd15_pipeline(0)


def calibrated_ranges(pipe, protect: str) -> dict[str, list]:
    config = QuantConfig.from_setting("W8A4", protect=protect, clip_percentile=99.0)
    prompts = calibration_prompts(2, trigger="<sks>")
    quantized = quantize(copy.deepcopy(pipe), config, calibration_prompts=prompts, num_inference_steps=2, batch_size=2, int8_kernels=False)
    return quantized.unet.taq_state.ranges()


def test_trigger_protection_changes_the_calibrated_ranges_of_the_rest(float_pipe):
    protected, plain = calibrated_ranges(float_pipe, "trigger"), calibrated_ranges(float_pipe, "none")
    assert protected.keys() == plain.keys()
    text_points = [name for name in plain if name.endswith((":text", ":k", ":v"))]
    assert text_points
    changed = [name for name in text_points if protected[name] != plain[name]]
    assert len(changed) == len(text_points)  # every point that sees trigger rows calibrates without them
    # points the protection mask never reaches (self-attention, convolutions) calibrate the same either way
    untouched = [name for name in plain if ":" not in name and "attn1" in name]
    assert untouched and all(protected[n] == plain[n] for n in untouched)


def test_timestep_groups_keep_one_range_per_group_and_switch_by_timestep(float_pipe):
    config = QuantConfig.from_setting("W8A4", protect="trigger", timestep_groups=2)
    prompts = calibration_prompts(2, trigger="<sks>")
    pipe = quantize(copy.deepcopy(float_pipe), config, calibration_prompts=prompts, num_inference_steps=4, batch_size=2, int8_kernels=False)
    quantizers = pipe.unet.taq_state.quantizers
    grouped = {name: q.grouped_ranges() for name, q in quantizers.items()}
    assert all(set(g) == {0, 1} for g in grouped.values())  # 4 steps over 1000 timesteps reach both halves
    # image features drift with the timestep; the text entering cross-attention does not
    assert sum(g[0] != g[1] for name, g in grouped.items() if ":" not in name) > len(grouped) // 2
    assert all(g[0] == g[1] for name, g in grouped.items() if name.endswith(":text"))
    conv = next(name for name in grouped if name.endswith("conv_in"))
    sample = torch.randn(1, 4, 32, 32)
    text = pipe.text_encoder(pipe.tokenizer(["a dog"], padding="max_length", return_tensors="pt").input_ids)[0]
    for timestep, group in ((900, 1), (100, 0), (999, 1)):
        pipe.unet(sample, timestep, encoder_hidden_states=text)
        assert [quantizers[conv].lo, quantizers[conv].hi] == grouped[conv][group]


def test_an_uncalibrated_timestep_group_takes_the_nearest_calibrated_range():
    q = ActivationQuantizer(8, mode="observe")
    q.select_group(0)
    q(torch.tensor([-1.0, 1.0]))
    q.select_group(3)
    q(torch.tensor([-5.0, 5.0]))
    q.mode = "static"
    q.select_group(2)
    assert (q.lo, q.hi) == (-5.0, 5.0)
    q.select_group(1)
    assert (q.lo, q.hi) == (-1.0, 1.0)


def test_smoothing_keeps_the_float_product_and_flattens_channel_outliers():
    from personalq.taq.smoothing import divide_inputs, smooth_weights

    layer = torch.nn.Linear(8, 4)
    x = torch.randn(64, 8)
    x[:, 3] *= 50.0  # one outlier channel
    model = torch.nn.Sequential(layer)
    before = model(x)
    scales = smooth_weights(_Wrap(model), 0.5, lambda: model(x))
    divide_inputs(_Wrap(model), scales)
    seen = {}
    layer.register_forward_pre_hook(lambda m, a: seen.setdefault("x", a[0]))  # after the dividing hook
    assert torch.allclose(model(x), before, atol=1e-4)
    spread = lambda t: float(t.abs().amax(0).max() / t.abs().amax(0).min())  # noqa: E731
    assert spread(seen["x"]) < spread(x) / 5


class _Wrap(torch.nn.Module):
    """A stand-in UNet: the smoothing helpers only walk modules and find no cross-attention here."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner


def test_smoothquant_and_grouped_configs_quantize_and_render(float_pipe):
    prompts = calibration_prompts(2, trigger="<sks>")
    for options in ({"smooth_alpha": 0.5}, {"timestep_groups": 3}):
        pipe = quantize(copy.deepcopy(float_pipe), QuantConfig.from_setting("W8A8", **options), calibration_prompts=prompts,
                        num_inference_steps=2, batch_size=2)
        image = pipe(prompts[:1], num_inference_steps=2, output_type="np").images
        assert image.shape == (1, 32, 32, 3) and float(image.std()) > 0
    with pytest.raises(ValueError):
        QuantConfig(timestep_groups=0)
    with pytest.raises(ValueError):
        QuantConfig(calibration="dynamic", timestep_groups=2)
    with pytest.raises(ValueError):
        QuantConfig(smooth_alpha=1.0)


def test_weights_carry_one_scale_per_output_channel(float_pipe):
    """quanto stores int8 weights with a scale per output channel and int4 with per-channel groups."""
    from personalq.taq.weights import quantize_weights

    for bits in (8, 4):
        unet = copy.deepcopy(float_pipe.unet)
        quantize_weights(unet, bits, "quanto")
        layer = unet.down_blocks[0].attentions[0].transformer_blocks[0].ff.net[2]
        scale = layer.weight._scale
        group = getattr(layer.weight, "_group_size", None)  # int4: groups of 128 inputs when the row is long enough
        rows = layer.out_features if group is None else layer.weight.numel() // group
        assert scale.shape == (rows, 1) and scale.unique().numel() > 1
