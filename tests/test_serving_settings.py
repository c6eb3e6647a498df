"""One `Setting` registry: unknown or unrunnable settings are refused up front, in one line, and
full-precision settings really run in their dtype."""

from __future__ import annotations

import copy

import pytest
import torch

import personalq.setting
from personalq.random_pipelines import tiny_sd15_pipeline
from personalq.serving import GenerationRequest, PipelineManager, ServingConfig, ServingError
from personalq.serving.config import resolve_device_dtype
from personalq.setting import SETTINGS, SettingError, get_setting, names_for
from personalq.taq.config import QuantConfig

TEMPLATE = tiny_sd15_pipeline(0)


def manager(tmp_path, **config):
    return PipelineManager.from_pipeline(copy.deepcopy(TEMPLATE), "sd15", ServingConfig(quantized_dir=tmp_path / "q", **config))


def test_registry_names_bits_dtype_and_devices():
    assert list(SETTINGS) == ["FP32", "FP16", "BF16", "W8A8", "W4A8", "W8A4", "W4A4"]
    w4a8 = get_setting(" w4a8 ")
    assert (w4a8.w_bits, w4a8.a_bits, w4a8.dtype, w4a8.quantized) == (4, 8, None, True)
    assert (get_setting("BF16").dtype, get_setting("BF16").quantized) == ("bfloat16", False)
    assert QuantConfig.from_setting("W8A4").name == "W8A4", "TAQ's config reads the same registry"
    assert names_for("cuda:0") == list(SETTINGS)


@pytest.mark.parametrize("name", ["W2A8", "W3A3", "INT8", ""])
def test_unknown_setting_is_refused_in_one_line_before_any_work(tmp_path, name):
    served = manager(tmp_path)
    unet = served.pipe.unet
    with pytest.raises(ServingError, match="unknown setting") as error:
        served.generate(GenerationRequest("a photo of a bear", setting=name, steps=1))
    assert "\n" not in str(error.value) and "W8A8" in str(error.value), "the reason names what to choose instead"
    assert served.pipe.unet is unet and not (tmp_path / "q").exists(), "nothing was quantized or written"
    assert [name for name, _, _ in served.resident()] == ["base", "unet:base"]


def test_a_float_setting_of_another_dtype_is_refused_not_run_as_fp32(tmp_path, monkeypatch):
    monkeypatch.setattr(personalq.setting, "_cpu_supports", lambda dtype: True)  # the dtype check, not this CPU's instructions
    served = manager(tmp_path)
    with pytest.raises(ServingError, match="FP16 runs in float16, but this server was loaded in float32"):
        served.generate(GenerationRequest("a photo of a bear", setting="FP16", steps=1))
    assert served.generate(GenerationRequest("a photo of a bear", setting="fp32", steps=1)).setting == "FP32"


def test_a_device_without_the_instructions_refuses_the_dtype(monkeypatch):
    monkeypatch.setattr(personalq.setting, "_cpu_supports", lambda dtype: False)
    with pytest.raises(SettingError, match="BF16 needs a CPU with bfloat16 instructions") as error:
        resolve_device_dtype("cpu", "bf16")
    assert "\n" not in str(error.value)
    assert get_setting("BF16").refusal("cuda") is None, "the CPU check does not apply to CUDA"


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="this CPU has no bfloat16 instructions")
def test_bf16_really_runs_in_bf16_on_cpu(tmp_path):
    served = PipelineManager.from_pipeline(copy.deepcopy(TEMPLATE), "sd15", ServingConfig(device="cpu", dtype="bf16"))
    seen = []
    served.pipe.unet.register_forward_hook(lambda module, args, output: seen.append(output[0].dtype))
    result = served.generate(GenerationRequest("a photo of a bear", setting="BF16", steps=1))
    assert result.setting == "BF16" and seen and set(seen) == {torch.bfloat16}
    assert served.pipe.text_encoder.dtype == torch.bfloat16


def test_cli_refuses_a_setting_before_loading_any_model(monkeypatch):
    from typer.testing import CliRunner

    import personalq.serving.manager
    from personalq.cli import app

    monkeypatch.setattr(personalq.serving.manager, "load_base_pipeline", lambda *a, **k: pytest.fail("a model was loaded"))
    result = CliRunner().invoke(app, ["generate", "a photo", "--setting", "W2A8"])
    assert result.exit_code == 1
    assert "unknown setting 'W2A8'; choose one of FP32, FP16, BF16, W8A8" in result.output
