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
