"""The TAQ entry points: quantize a pipeline's UNet in place, save it, load it back without recalibrating."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from personalq.diffusers_import import DIFFUSERS_IMPORT
from personalq.taq.activations import CROSS_POINTS, install_activation_quantizers
from personalq.taq.config import QuantConfig
from personalq.taq.kernels import int8_quantization_map, use_int8_kernels
from personalq.taq.prompts import calibration_prompts as default_calibration_prompts
from personalq.taq.smoothing import divide_inputs, smooth_weights
from personalq.taq.triggers import detect_triggers, protection_kwargs
from personalq.taq.weights import bnb_layers, load_bnb_layers, quantize_weights, set_aside_bnb_layers

WEIGHTS_FILE = "diffusion_pytorch_model.safetensors"
TAQ_FILE = "taq.json"


def _is_quantized(unet) -> bool:
    return getattr(unet, "taq_state", None) is not None or any(hasattr(m, "weight_qtype") for m in unet.modules())


def _num_train_timesteps(pipe) -> int:
    """The scheduler's training horizon, which timestep groups split evenly (1000 for SD-style schedulers)."""
    config = getattr(getattr(pipe, "scheduler", None), "config", None)
    return int(getattr(config, "num_train_timesteps", 1000))


def calibrate(pipe, prompts: list[str], triggers: list[str] | None, num_inference_steps: int, batch_size: int = 4, seed: int = 0) -> None:
    """Run the pipeline over `prompts` so every observing quantizer sees every timestep and both CFG halves."""
    for start in range(0, len(prompts), batch_size):
        batch = prompts[start : start + batch_size]
        generator = torch.Generator(pipe.device).manual_seed(seed + start)
        with torch.no_grad():
            pipe(
                batch,
                num_inference_steps=num_inference_steps,
                generator=generator,
                output_type="latent",
                cross_attention_kwargs=protection_kwargs(pipe, batch, triggers),
            )


def quantize(
    pipe,
    config: QuantConfig,
    calibration_prompts: list[str] | None = None,
    triggers: list[str] | None = None,
    num_inference_steps: int = 10,
    batch_size: int = 4,
    seed: int = 0,
    int8_kernels: bool = True,
    weight_backend: str | None = None,
):
    """Quantize `pipe.unet` in place to `config` and return `pipe`.

    Weights are stored low-bit first, then (for static calibration) activation ranges are collected
    on that weight-quantized UNet over `calibration_prompts` (default: 64 templated prompts around
    the first trigger) at every step of `num_inference_steps`. `triggers=None` treats every `<...>`
    word of a prompt as a trigger. Load LoRA adapters before or after: adapter layers stay float.
    `int8_kernels` then runs the int8 layers on CPU integer kernels (`kernels.py`); False keeps the
    fake-quantized reference. `weight_backend` ("quanto", "bitsandbytes") defaults to quanto on CPU
    and bitsandbytes Linear + quanto convolutions on CUDA (`weights.BACKENDS`).
    """
    unet = pipe.unet
    if _is_quantized(unet):
        raise ValueError("this UNet is already quantized; load the float model again to quantize it differently")
    if config.w_bits == 16:
        pipe.to(dtype=torch.float16)
    if calibration_prompts is None:
        calibration_prompts = default_calibration_prompts(trigger=(triggers or ["<sks>"])[0])
    if triggers is None:
        triggers = sorted({t for p in calibration_prompts for t in detect_triggers(p)})
    run_calibration = lambda: calibrate(pipe, calibration_prompts, triggers, num_inference_steps, batch_size, seed)  # noqa: E731
    smoothing = smooth_weights(unet, config.smooth_alpha, run_calibration) if config.smooth_alpha > 0 and config.quantizes_activations else {}
    if config.quantizes_weights:
        quantize_weights(unet, config.w_bits, weight_backend)
    if not config.quantizes_activations:
        install_activation_quantizers(unet, config, mode="off", points=(), layer_inputs=False)
        return pipe
    divide_inputs(unet, smoothing)
    static = config.calibration == "static"
    state = install_activation_quantizers(unet, config, mode="observe" if static else "dynamic",
                                          num_train_timesteps=_num_train_timesteps(pipe))
    if static:
        run_calibration()
        state.set_mode("static")
        missing = [name for name, q in state.quantizers.items() if q.lo is None]
        if missing:
            raise RuntimeError(f"calibration never reached {len(missing)} quantization points, e.g. {missing[0]}")
        if int8_kernels and not config.needs_reference_path:
            use_int8_kernels(unet)
    return pipe


def save_quantized(pipe_or_unet, directory: str | Path) -> Path:
    """Write the quantized UNet: low-bit safetensors, diffusers config.json, and taq.json (settings + scales)."""
    from optimum.quanto import quantization_map
    from safetensors.torch import save_file

    unet = getattr(pipe_or_unet, "unet", pipe_or_unet)
    state = getattr(unet, "taq_state", None)
    if state is None:
        raise ValueError("this UNet was not quantized with personalq.taq.quantize")
    if state.config.needs_reference_path:
        raise ValueError("timestep-grouped ranges and smoothing are benchmark calibrations; saving them is not supported")
    if getattr(unet, "peft_config", None):
        raise ValueError("unload the LoRA adapters (pipe.unload_lora_weights()) before saving the quantized base UNet")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in unet.state_dict().items()}, directory / WEIGHTS_FILE)
    unet.save_config(directory)
    meta = {
        "config": state.config.to_dict(),
        "dtype": str(unet.dtype).removeprefix("torch."),
        "quantization_map": {**quantization_map(unet), **int8_quantization_map(unet)},
        "bitsandbytes_layers": bnb_layers(unet),
        "activation_ranges": state.ranges(),
    }
    (directory / TAQ_FILE).write_text(json.dumps(meta, indent=1))
    return directory


def load_quantized(pipe, directory: str | Path, int8_kernels: bool = True):
    """Put the saved quantized UNet into `pipe` (same architecture) with its stored scales; returns `pipe`.

    The low-bit tensors go straight into quantized modules built on the meta device (no float copy),
    then, with `int8_kernels`, into the CPU kernels' packed layout once.
    """
    from accelerate import init_empty_weights
    with DIFFUSERS_IMPORT:
        from diffusers import UNet2DConditionModel
    from optimum.quanto import requantize
    from safetensors.torch import load_file

    directory = Path(directory)
    if not (directory / TAQ_FILE).exists():
        raise FileNotFoundError(f"{directory} holds no {TAQ_FILE}: not a TAQ-quantized UNet")
    meta = json.loads((directory / TAQ_FILE).read_text())
    config = QuantConfig(**meta["config"])
    dtype = getattr(torch, meta["dtype"])
    state_dict = load_file(directory / WEIGHTS_FILE)
    with init_empty_weights():
        unet = UNet2DConditionModel.from_config(UNet2DConditionModel.load_config(directory)).to(dtype)
    bnb = meta.get("bitsandbytes_layers", {})
    shells = set_aside_bnb_layers(unet, bnb)
    if meta["quantization_map"]:
        requantize(unet, state_dict, meta["quantization_map"], device=torch.device("cpu"))
    else:
        unet.load_state_dict(state_dict, assign=True, strict=not bnb)
    load_bnb_layers(unet, bnb, shells, state_dict, pipe.device)
    loaded = set(unet.state_dict())
    if loaded != set(state_dict):
        raise ValueError(f"{directory}: saved tensors do not match the UNet ({len(loaded ^ set(state_dict))} keys differ)")
    unet.eval()
    if dtype == torch.float16:
        pipe.to(dtype=torch.float16)
    pipe.register_modules(unet=unet.to(pipe.device))
    if not config.quantizes_activations:
        install_activation_quantizers(unet, config, mode="off", points=(), layer_inputs=False)
        return pipe
    static = config.calibration == "static"
    state = install_activation_quantizers(unet, config, mode="static" if static else "dynamic", points=CROSS_POINTS)
    ranges = meta["activation_ranges"]
    if set(ranges) != set(state.quantizers):
        raise ValueError(f"{directory}: stored activation ranges do not match this UNet's quantization points")
    for name, quantizer in state.quantizers.items():
        quantizer.lo, quantizer.hi = ranges[name]
    if int8_kernels:
        use_int8_kernels(unet)
    return pipe
