"""A quantized setting serves its quantized UNet alone: switching settings never holds more resident
bytes than a full-precision-only server, and full precision comes back exactly."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import personalq.serving.unets
from personalq.random_pipelines import tiny_sd15_pipeline
from personalq.serving import GenerationRequest, PipelineManager, ServingConfig
from personalq.serving.cache import resident_bytes

TEMPLATE = tiny_sd15_pipeline(0)
PROMPT = "a photo of <sks> in the snow"


def manager(tmp_path, **config):
    config = {"quantized_dir": tmp_path / "q", "calibration_prompts": 2, "calibration_steps": 1, **config}
    return PipelineManager.from_pipeline(copy.deepcopy(TEMPLATE), "sd15", ServingConfig(**config))


def draw(served, setting):
    result = served.generate(GenerationRequest(PROMPT, setting=setting, steps=2, seed=3))
    return np.asarray(result.image, dtype=np.int16), result


def test_switching_settings_never_holds_more_than_full_precision_alone(tmp_path):
    served = manager(tmp_path)
    fp32_image, fp32 = draw(served, "FP32")
    fp32_only = fp32.resident_bytes
    for setting in ("W8A8", "W4A8", "W8A8", "FP32", "W4A8"):
        _, result = draw(served, setting)
        names = [name for name, _, _ in served.resident()]
        assert result.resident_bytes <= fp32_only, f"{setting}: {result.resident_bytes} > {fp32_only}"
        assert ("unet:base" in names) == (setting == "FP32"), f"{setting} holds {names}"
        assert resident_bytes(served.pipe) <= fp32_only, "nothing outside the cache keeps another UNet alive"
    assert set(names) == {"base", "quantized:base:W4A8:trigger"}
    assert np.array_equal(draw(served, "FP32")[0], fp32_image), "the full-precision UNet read back from disk is the same"


def test_saved_variants_load_without_a_full_precision_unet(tmp_path, monkeypatch):
    first = manager(tmp_path)
    made, _ = draw(first, "W8A8")
    served = manager(tmp_path)
    served.cache.evict("unet:base")  # as after a restart with only quantized settings used
    monkeypatch.setattr(personalq.serving.unets.UnetVariants, "full", lambda self: pytest.fail("the full-precision UNet was needed"))
    monkeypatch.setattr(personalq.serving.unets.copy, "deepcopy", lambda *a: pytest.fail("a full-precision copy was made"))
    loaded, _ = draw(served, "W8A8")
    assert np.array_equal(loaded, made)
    assert [name for name, _, _ in served.resident()] == ["base", "quantized:base:W8A8:trigger"]


def test_with_a_budget_full_precision_stays_while_it_fits_and_goes_least_recently_used(tmp_path):
    probe = manager(tmp_path)
    draw(probe, "W8A8")
    sizes = {name: size for name, _, size in probe.resident()}
    both = sizes["base"] + probe.unets.allowance + sizes["quantized:base:W8A8:trigger"]
    roomy = manager(tmp_path, memory_budget_bytes=both)
    draw(roomy, "FP32")
    draw(roomy, "W8A8")
    assert {name for name, _, _ in roomy.resident()} == {"base", "unet:base", "quantized:base:W8A8:trigger"}
    draw(roomy, "W4A8")  # does not fit beside both: the least recently used UNet (FP32) goes
    assert {name for name, _, _ in roomy.resident()} == {"base", "quantized:base:W8A8:trigger", "quantized:base:W4A8:trigger"}
    assert roomy.cache.peak_bytes <= both


def test_bench_serve_switching_settings_peaks_no_higher_than_full_precision_alone(tmp_path):
    from personalq.eval.serve_bench import bench_serve

    def peak(setting):
        results = bench_serve("sd15-tiny", n_requests=6, n_checkpoints=2, setting=setting, steps=1, naive=False,
                              workdir=tmp_path / setting.replace(",", "-"), log=lambda line: None)
        return results[0].peak_resident_bytes

    assert peak("FP32,W8A8,W4A8") <= peak("FP32")


def test_a_snapshot_left_by_an_earlier_server_is_not_trusted(tmp_path):
    other = PipelineManager.from_pipeline(tiny_sd15_pipeline(1), "sd15", ServingConfig(quantized_dir=tmp_path / "q", calibration_prompts=2, calibration_steps=1))
    draw(other, "W8A8")  # leaves a snapshot of seed 1's weights
    served = manager(tmp_path)  # seed 0, same folder
    fp32_image, _ = draw(served, "FP32")
    draw(served, "W4A8")
    assert np.array_equal(draw(served, "FP32")[0], fp32_image)
