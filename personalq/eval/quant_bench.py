"""`personalq bench quant`: every bit-width setting of one base, side by side in one process.

For each setting the pipeline is loaded the way serving loads it (full precision in its dtype; a
quantized setting as the shared text encoder and VAE plus the saved low-bit UNet, with no
full-precision UNet at all), then measured: resident bytes (the sum of tensor bytes, and the
process's RSS growth), the UNet's own bytes, load seconds, the median latency of one UNet call (the
batch of two a guided step runs), and the seconds of a whole image. Ratios are to FP32.
Quantized variants are calibrated once and saved under the work folder; later runs reuse them, so
the first run also pays calibration (not counted in any figure).
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
import torch

from personalq.serving.cache import resident_bytes
from personalq.setting import SETTINGS, Setting

BASES = ("pq-nano", "sd15-shape")
PROMPT = "a photo of <sks> in the snow"


@dataclass(frozen=True)
class BenchPlan:
    """How much to measure: UNet calls timed per setting (in `blocks`; the least disturbed block's median
    counts, since the machine is shared), steps of the timed image, calibration size."""

    unet_calls: int
    image_steps: int
    blocks: int = 1
    calibration_prompts: int = 4
    calibration_steps: int = 2


PLANS = {"pq-nano": BenchPlan(unet_calls=10, image_steps=20, blocks=3), "sd15-shape": BenchPlan(unet_calls=3, image_steps=2,
                                                                                     calibration_prompts=2, calibration_steps=1)}


@dataclass
class SettingFigures:
    resident_mb: float
    rss_mb: float
    unet_mb: float
    load_s: float
    step_ms: float
    image_s: float
    resident_ratio: float = 1.0
    unet_ratio: float = 1.0
    speed_ratio: float = 1.0


def build_base(base: str):
    """The float pipeline of a bench base: the shipped PQ-Nano, or a random-weight SD 1.5-shaped UNet (860M)."""
    if base == "pq-nano":
        from personalq.nano import load_pipeline

        return load_pipeline()
    if base == "sd15-shape":
        from personalq.random_pipelines import sd15_pipeline_random

        return sd15_pipeline_random(0)
    raise ValueError(f"unknown base {base!r}; choose one of {', '.join(BASES)}")


def runnable_settings(device: str) -> list[Setting]:
    return [s for s in SETTINGS.values() if s.refusal(device) is None]


def prepare(base: str, workdir: Path, settings: list[Setting], plan: BenchPlan, log=print) -> Path:
    """Save the base pipeline and every quantized variant once under `workdir`; returns the base folder."""
    from personalq.taq import QuantConfig, calibration_prompts, quantize, save_quantized

    base_dir = workdir / "base"
    if not (base_dir / "model_index.json").exists():
        log(f"saving the {base} pipeline to {base_dir}")
        build_base(base).save_pretrained(base_dir)
    for setting in (s for s in settings if s.quantized):
        target = workdir / setting.name
        if (target / "taq.json").exists():
            continue
        log(f"calibrating {setting.name} once (saved to {target})")
        pipe = _load_float(base_dir, torch.float32, "cpu")
        quantize(pipe, QuantConfig.from_setting(setting.name, protect="trigger"),
                 calibration_prompts=calibration_prompts(plan.calibration_prompts, trigger="<sks>"),
                 num_inference_steps=plan.calibration_steps, batch_size=2)
        save_quantized(pipe, target)
        del pipe
        gc.collect()
    return base_dir


def _load_float(base_dir: Path, dtype: torch.dtype, device: str, unet: bool = True):
    from diffusers import StableDiffusionPipeline

    kwargs = {} if unet else {"unet": None}
    pipe = StableDiffusionPipeline.from_pretrained(str(base_dir), torch_dtype=dtype, local_files_only=True, **kwargs).to(device)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def load_setting(base_dir: Path, workdir: Path, setting: Setting, device: str):
    """The pipeline as serving holds it for `setting`: a quantized UNet is read straight from its saved low-bit files."""
    if not setting.quantized:
        return _load_float(base_dir, getattr(torch, setting.dtype), device)
    from personalq.taq import load_quantized

    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    return load_quantized(_load_float(base_dir, dtype, device, unet=False), workdir / setting.name)


def _unet_call_ms(pipe, protect: bool, calls: int, blocks: int) -> float:
    from personalq.taq import protection_kwargs
    from personalq.taq.bops import dummy_unet_inputs

    inputs = dummy_unet_inputs(pipe.unet, batch=2, seq_len=pipe.tokenizer.model_max_length)
    kwargs = {"cross_attention_kwargs": protection_kwargs(pipe, [PROMPT])} if protect else {}
    medians = []
    with torch.no_grad():
        pipe.unet(**inputs, **kwargs)  # warm-up: first-call allocations and kernel selection
        for _ in range(blocks):
            times = []
            for _ in range(calls):
                _sync(pipe)
                start = time.perf_counter()
                pipe.unet(**inputs, **kwargs)
                _sync(pipe)
                times.append(time.perf_counter() - start)
            medians.append(statistics.median(times))
    return min(medians) * 1e3


def _image_s(pipe, protect: bool, steps: int) -> float:
    from personalq.taq import protection_kwargs

    kwargs = {"cross_attention_kwargs": protection_kwargs(pipe, [PROMPT])} if protect else {}
    size = pipe.unet.config.sample_size * pipe.vae_scale_factor  # a pipeline built without a UNet cannot work it out
    start = time.perf_counter()
    with torch.no_grad():
        pipe(PROMPT, height=size, width=size, num_inference_steps=steps, generator=torch.Generator("cpu").manual_seed(0), **kwargs)
    _sync(pipe)
    return time.perf_counter() - start


def _sync(pipe) -> None:
    if pipe.device.type == "cuda":
        torch.cuda.synchronize()


def measure_setting(base_dir: Path, workdir: Path, setting: Setting, device: str, plan: BenchPlan) -> SettingFigures:
    gc.collect()
    rss_before = psutil.Process().memory_info().rss
    start = time.perf_counter()
    pipe = load_setting(base_dir, workdir, setting, device)
    load_s = time.perf_counter() - start
    step_ms = _unet_call_ms(pipe, setting.quantized, plan.unet_calls, plan.blocks)
    rss_mb = (psutil.Process().memory_info().rss - rss_before) / 2**20  # after the calls: mapped weight files count once touched
    figures = SettingFigures(
        resident_mb=resident_bytes(pipe) / 2**20,
        rss_mb=rss_mb,
        unet_mb=resident_bytes(pipe.unet) / 2**20,
        load_s=load_s,
        step_ms=step_ms,
        image_s=_image_s(pipe, setting.quantized, plan.image_steps),
    )
    del pipe
    gc.collect()
    return figures


def bench_quant(base: str = "pq-nano", device: str = "cpu", workdir: Path | None = None, plan: BenchPlan | None = None,
                log=print) -> dict:
    """Every setting `device` can run, measured one after another in this process; the `--json` object."""
    from personalq.config import personalq_home

    plan = plan or PLANS[base]
    workdir = Path(workdir or personalq_home() / "bench" / "quant" / base)
    settings = runnable_settings(device)
    base_dir = prepare(base, workdir, settings, plan, log)
    results = {}
    for setting in settings:
        log(f"measuring {setting.name}")
        results[setting.name] = measure_setting(base_dir, workdir, setting, device, plan)
    full = results["FP32"]
    for figures in results.values():
        figures.resident_ratio = figures.resident_mb / full.resident_mb
        figures.unet_ratio = figures.unet_mb / full.unet_mb
        figures.speed_ratio = figures.step_ms / full.step_ms
    return {"base": base, "device": device, "torch_threads": torch.get_num_threads(), "plan": asdict(plan),
            "settings": {name: {k: round(v, 4) for k, v in asdict(f).items()} for name, f in results.items()}}


def quant_table(result: dict) -> str:
    """BENCHMARKS.md's table of one `bench_quant` result."""
    lines = [
        "| setting | resident MiB (tensors) | RSS growth MiB | UNet MiB | load s | UNet call ms (median) | image s | resident / FP32 | UNet / FP32 | step time / FP32 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, f in result["settings"].items():
        lines.append(f"| {name} | {f['resident_mb']:.1f} | {f['rss_mb']:.1f} | {f['unet_mb']:.1f} | {f['load_s']:.2f} | {f['step_ms']:.1f} | "
                     f"{f['image_s']:.2f} | {f['resident_ratio']:.3f} | {f['unet_ratio']:.3f} | {f['speed_ratio']:.3f} |")
    return "\n".join(lines)


def _ms(fn, calls: int = 10) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def kernel_times() -> dict[str, float]:
    """Milliseconds of one product at SD 1.5 sizes per CPU path: the kernels behind each setting, alone.

    Linear: 2048 tokens x 320 -> 1280 (a 32x32 feed-forward). Conv: 320 -> 320 channels, 3x3, 32x32, batch 2.
    """
    import torch.nn.functional as F
    from optimum.quanto import freeze, qint4
    from optimum.quanto import quantize as quanto_quantize

    from personalq.taq.kernels import Int8Conv2d, Int8Linear
    from personalq.taq.quantizers import ActivationQuantizer

    gen = torch.Generator().manual_seed(0)
    x, linear = torch.randn(2048, 320, generator=gen), torch.nn.Linear(320, 1280)
    image, conv = torch.randn(2, 320, 32, 32, generator=gen), torch.nn.Conv2d(320, 320, 3, padding=1)
    grid = ActivationQuantizer(8, mode="static", lo=-4.0, hi=4.0)

    def int8(weight):
        scale = weight.abs().amax(dim=tuple(range(1, weight.ndim))) / 127
        return torch.round(weight / scale.reshape(-1, *([1] * (weight.ndim - 1)))).to(torch.int8), scale

    int8_linear, int8_conv = Int8Linear(*int8(linear.weight.data), linear.bias, grid), Int8Conv2d(conv, *int8(conv.weight.data), grid)
    int4_linear = torch.nn.Sequential(torch.nn.Linear(320, 1280))
    quanto_quantize(int4_linear, weights=qint4)
    freeze(int4_linear)
    with torch.no_grad():
        return {
            "linear fp32": _ms(lambda: linear(x)),
            "linear bf16": _ms(lambda: F.linear(x.bfloat16(), linear.weight.bfloat16())),
            "linear int8 (oneDNN, W8A8)": _ms(lambda: int8_linear(x)),
            "linear int4 (quanto, W4)": _ms(lambda: int4_linear(x)),
            "conv fp32": _ms(lambda: conv(image)),
            "conv bf16": _ms(lambda: F.conv2d(image.bfloat16(), conv.weight.bfloat16(), padding=1)),
            "conv int8 (oneDNN, W8A8)": _ms(lambda: int8_conv(image)),
        }
