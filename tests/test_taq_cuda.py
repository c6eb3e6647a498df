"""The CUDA weight path (bitsandbytes Linear + quanto convolutions): runs only where CUDA is present.

Records `torch.cuda.max_memory_allocated` per setting on the SD 1.5-shaped UNet (printed; run with -s).
"""

import gc

import pytest
import torch

from personalq.random_pipelines import sd15_pipeline_random, tiny_sd15_pipeline
from personalq.serving.cache import resident_bytes
from personalq.taq import QuantConfig, calibration_prompts, load_quantized, protection_kwargs, quantize, save_quantized
from personalq.taq.bops import dummy_unet_inputs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
PROMPT = "a <sks> dog sitting in the park"


def quantized(setting, pipe=None):
    pipe = (pipe or tiny_sd15_pipeline(0)).to("cuda", torch.float16)
    return quantize(pipe, QuantConfig.from_setting(setting), calibration_prompts=calibration_prompts(2, trigger="<sks>"),
                    num_inference_steps=1, batch_size=2)


def unet_out(pipe):
    inputs = dummy_unet_inputs(pipe.unet, batch=2)
    with torch.no_grad():
        return pipe.unet(**inputs, cross_attention_kwargs=protection_kwargs(pipe, [PROMPT])).sample


@pytest.mark.parametrize("setting, linear, bits", [("W8A8", "Linear8bitLt", 8), ("W4A8", "Linear4bit", 4)])
def test_linear_and_convolutions_are_low_bit_and_save_and_load(setting, linear, bits, tmp_path):
    pipe = quantized(setting)
    kinds = {type(m).__name__ for m in pipe.unet.modules()}
    assert linear in kinds and "QConv2d" in kinds and "Conv2d" not in kinds and "Linear" not in kinds
    convs = [m for name, m in pipe.unet.named_modules() if type(m).__name__ == "QConv2d" and name not in ("conv_in", "conv_out")]
    assert convs and all(m.weight_qtype.bits == bits for m in convs), "convolutions shrink to the setting's bits too"
    expected = unet_out(pipe)
    save_quantized(pipe, tmp_path / setting)
    loaded = load_quantized(tiny_sd15_pipeline(0).to("cuda", torch.float16), tmp_path / setting)
    assert resident_bytes(loaded.unet) == resident_bytes(pipe.unet)
    torch.testing.assert_close(unet_out(loaded), expected, rtol=1e-2, atol=1e-2)


def test_sd15_shape_peak_memory_per_setting():
    peaks = {}
    for setting in ("FP16", "W8A8", "W4A8"):
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        pipe = sd15_pipeline_random(0)
        pipe = pipe.to("cuda", torch.float16) if setting == "FP16" else quantized(setting, pipe)
        torch.cuda.reset_peak_memory_stats()
        unet_out(pipe)
        peaks[setting] = torch.cuda.max_memory_allocated()
        del pipe
    print({name: f"{peak / 2**20:.1f} MiB" for name, peak in peaks.items()}, torch.cuda.get_device_name())
    assert peaks["W8A8"] <= 0.6 * peaks["FP16"] and peaks["W4A8"] <= 0.4 * peaks["FP16"]
