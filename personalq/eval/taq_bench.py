"""`personalq bench taq`: memory, bit-operations and speed of each setting on SD 1.5's real UNet.

The UNet has SD 1.5's config (860M parameters) with random weights (`sd15_pipeline_random`): size,
BOPs and latency do not depend on weight values, and no weights can be downloaded here. Each
setting is calibrated on one templated prompt for a few steps (the benchmark times the UNet, not
the calibration), then timed on batch-1 64x64 latents with one protected trigger span.
Quantized settings run on optimum-quanto's CPU kernels, which dequantize weights on the fly: they
save memory and BOPs, not CPU seconds.
"""

from __future__ import annotations

import copy
import gc
import statistics
import time
from collections.abc import Callable

import torch

from personalq.taq.bops import dummy_unet_inputs, unet_macs
from personalq.taq.config import SETTINGS, QuantConfig
from personalq.taq.pipeline import quantize
from personalq.taq.prompts import calibration_prompts
from personalq.taq.triggers import PROTECT_KWARG, find_trigger_spans
from personalq.taq.weights import resident_weight_bytes

BENCH_PROMPT_TRIGGER = "<sks>"


def _timed_calls(unet, inputs: dict, cross_attention_kwargs: dict, calls: int) -> list[float]:
    seconds = []
    with torch.no_grad():
        for _ in range(calls):
            start = time.perf_counter()
            unet(**inputs, cross_attention_kwargs=cross_attention_kwargs)
            seconds.append(time.perf_counter() - start)
    return seconds


def benchmark_settings(
    settings=tuple(SETTINGS),
    calls: int = 1,
    calibration_steps: int = 1,
    seed: int = 0,
    pipe_factory=None,
    on_row: Callable[[list[dict]], None] | None = None,
) -> list[dict]:
    """One row per setting: resident bytes (UNet and its Linear/Conv layers), BOPs, seconds per UNet call.

    FP16 on CPU is sized but not timed: PyTorch has no fast float16 convolution on CPU (a single
    SD 1.5 3x3 conv runs hundreds of times slower than in float32), so its BOPs come from the float
    MAC count at 16x16 bits. `on_row` receives the rows so far after each setting.
    """
    if pipe_factory is None:
        from personalq.random_pipelines import sd15_pipeline_random

        pipe_factory = sd15_pipeline_random
    base = pipe_factory(seed)
    prompt = calibration_prompts(1, seed=seed, trigger=BENCH_PROMPT_TRIGGER)
    span = find_trigger_spans(base.tokenizer, prompt[0], [BENCH_PROMPT_TRIGGER])[0]
    float_macs = None
    rows = []
    for name in settings:
        pipe = copy.deepcopy(base)
        config = QuantConfig.from_setting(name)
        start = time.perf_counter()
        quantize(pipe, config, calibration_prompts=prompt, triggers=[BENCH_PROMPT_TRIGGER], num_inference_steps=calibration_steps, batch_size=1)
        row = {"setting": name, "quantize_s": time.perf_counter() - start}
        unet = pipe.unet
        row["unet_bytes"] = resident_weight_bytes(unet)
        row["layer_bytes"] = resident_weight_bytes(unet, layers_only=True)
        if config.w_bits == 16 and unet.device.type == "cpu":
            if float_macs is None:
                float_macs = sum(r.macs for r in unet_macs(base.unet))
            row.update(seconds=None, bops=float_macs * 16 * 16, note="not timed: no fast float16 convolution on CPU")
        else:
            inputs = dummy_unet_inputs(unet, seed=seed)
            protect = torch.zeros(1, inputs["encoder_hidden_states"].shape[1], dtype=torch.bool)
            protect[0, span.start : span.end] = True
            row["seconds"] = statistics.median(_timed_calls(unet, inputs, {PROTECT_KWARG: protect}, calls))
            records = unet_macs(unet)
            row["bops"] = sum(r.bops for r in records)
            if config.w_bits == 32 and config.a_bits == 32:
                float_macs = sum(r.macs for r in records)
        rows.append(row)
        if on_row is not None:
            on_row(rows)
        del pipe, unet
        gc.collect()
    return rows


def markdown_table(rows: list[dict]) -> str:
    """The README table: sizes relative to FP32 and FP16 as measured in the same run."""
    by_name = {r["setting"]: r for r in rows}
    fp32 = by_name.get("FP32")
    fp16 = by_name.get("FP16")
    lines = [
        "| setting | UNet weights (MiB) | vs FP32 | vs FP16 | Linear/Conv layers (MiB) | layers vs FP32 | TBOPs / call | s / UNet call |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    def ratio(ref, row, key):
        return f"{ref[key] / row[key]:.2f}x" if ref else "–"

    for r in rows:
        seconds = f"{r['seconds']:.2f}" if r.get("seconds") is not None else f"n/a ({r.get('note', '')})"
        tbops = f"{r['bops'] / 1e12:.2f}" if r.get("bops") is not None else "n/a"
        lines.append(
            f"| {r['setting']} | {r['unet_bytes'] / 2**20:.1f} | {ratio(fp32, r, 'unet_bytes')} | {ratio(fp16, r, 'unet_bytes')} "
            f"| {r['layer_bytes'] / 2**20:.1f} | {ratio(fp32, r, 'layer_bytes')} | {tbops} | {seconds} |"
        )
    return "\n".join(lines)
