"""`personalq quantize`, `personalq analyze tokens` and `personalq bench taq`: thin shells over personalq.taq."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Optional

import typer


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _load_pipeline(model: str):
    """Any diffusers pipeline folder (SD 1.5 or SDXL layout), offline."""
    from diffusers import DiffusionPipeline

    if not Path(model).is_dir():
        _fail(f"{model} is not a folder holding a diffusers pipeline (model_index.json)")
    if not (Path(model) / "model_index.json").exists():
        _fail(f"{model} has no model_index.json: save it with pipe.save_pretrained(DIR) first")
    pipe = DiffusionPipeline.from_pretrained(model, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def quantize_command(
    model: str = typer.Argument(..., help="Folder of a diffusers Stable Diffusion 1.5 / SDXL pipeline."),
    out: Path = typer.Option(..., "--out", help="Folder for the quantized UNet (safetensors + taq.json)."),
    w: int = typer.Option(8, "--w", help="Weight bits: 8, 4 or 2 (16/32 = float)."),
    a: int = typer.Option(8, "--a", help="Activation bits: 2..8 (16/32 = float)."),
    quantizer: str = typer.Option("linear", help="Grid of the cross-attention probabilities: linear or log."),
    protect: str = typer.Option("trigger", help="Full-precision tokens: trigger, bos, trigger+bos or none."),
    calibration: str = typer.Option("static", help="static (calibrated scales, stored) or dynamic (per call)."),
    trigger: list[str] = typer.Option(["<sks>"], help="Trigger token(s) of the checkpoint; repeat for several."),
    class_noun: str = typer.Option("dog", help="Class noun used in the calibration prompts."),
    prompts: int = typer.Option(64, help="Number of calibration prompts."),
    steps: int = typer.Option(10, help="Denoising steps per calibration prompt."),
):
    """Quantize a pipeline's UNet with TAQ and save it (load it with personalq.taq.load_quantized)."""
    from personalq.taq import QuantConfig, calibration_prompts, quantize, resident_weight_bytes, save_quantized

    try:
        config = QuantConfig(w_bits=w, a_bits=a, quantizer=quantizer, protect=protect, calibration=calibration)
        prompt_list = calibration_prompts(prompts, trigger=trigger[0], class_noun=class_noun)
    except ValueError as error:
        _fail(str(error))
    pipe = _load_pipeline(model)
    before = resident_weight_bytes(pipe.unet)
    quantize(pipe, config, calibration_prompts=prompt_list, triggers=trigger, num_inference_steps=steps)
    after = resident_weight_bytes(pipe.unet)
    save_quantized(pipe, out)
    typer.echo(f"{config.name} ({quantizer}, protect={protect}): UNet {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB ({before / after:.2f}x), saved to {out}")


def analyze_tokens_command(
    model: list[str] = typer.Option(..., "--model", help="Pipeline folder; repeat to aggregate over checkpoints."),
    prompt: str = typer.Option(..., help='Prompt with the trigger, e.g. "a <sks> sitting in the park".'),
    out: Path = typer.Option(..., "--out", help="Folder for tokens.csv, summary.md and the bar charts."),
    bits: int = typer.Option(4, help="Bits of the one token's K/V rows (2..8)."),
    trigger: Optional[list[str]] = typer.Option(None, help="Trigger(s); default: every <...> word in the prompt."),
    seed: list[int] = typer.Option([0, 1], help="Seeds; repeat for several."),
    steps: int = typer.Option(10, help="Denoising steps per image."),
    guidance: float = typer.Option(7.5, help="Classifier-free guidance scale."),
    scorer: Optional[str] = typer.Option(None, help="Image-text scorer as module:function, called (PIL image, text) -> float."),
):
    """Per-token sensitivity: image change when only that token's K/V rows are quantized."""
    from personalq.taq.analyze import analyze_tokens, write_report

    if not 2 <= bits <= 8:
        _fail(f"--bits {bits}: choose 2..8")
    score_fn = None
    if scorer:
        module_name, _, attr = scorer.partition(":")
        try:
            score_fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError, ValueError):
            _fail(f"--scorer {scorer}: expected an importable module:function")
    pipes = {Path(m).name or m: _load_pipeline(m) for m in model}
    records = analyze_tokens(pipes, prompt, trigger, bits=bits, seeds=tuple(seed), num_inference_steps=steps, guidance_scale=guidance, scorer=score_fn)
    if not any(r.is_trigger for r in records):
        typer.echo("warning: no trigger found in the prompt; every token is reported as an ordinary token", err=True)
    for path in write_report(records, out, bits):
        typer.echo(str(path))


def bench_taq_command(
    settings: str = typer.Option(",".join(["FP32", "FP16", "W8A8", "W4A8", "W8A4", "W4A4"]), help="Comma-separated settings."),
    calls: int = typer.Option(1, help="Timed UNet calls per setting (median reported)."),
    calibration_steps: int = typer.Option(1, help="Calibration steps (one prompt, both CFG halves) per setting."),
    threads: int = typer.Option(0, help="torch CPU threads (0 = torch's default)."),
):
    """SD 1.5 UNet (real config, random weights), CPU, 64x64 latents: bytes, BOPs, seconds per call."""
    import torch

    from personalq.taq.bench import benchmark_settings, markdown_table
    from personalq.taq.config import SETTINGS

    names = [s.strip().upper() for s in settings.split(",") if s.strip()]
    unknown = [s for s in names if s not in SETTINGS]
    if unknown:
        _fail(f"unknown setting(s) {', '.join(unknown)}: choose from {', '.join(SETTINGS)}")
    if threads > 0:
        torch.set_num_threads(threads)
    typer.echo(f"SD 1.5 UNet (random weights), batch 1, 64x64 latents, {torch.get_num_threads()} CPU threads, torch {torch.__version__}")
    benchmark_settings(names, calls=calls, calibration_steps=calibration_steps, on_row=lambda rows: typer.echo(markdown_table(rows) + "\n"))


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.command("quantize")(quantize_command)
    analyze_app = typer.Typer(help="Analyses that write tables and charts.", no_args_is_help=True)
    analyze_app.command("tokens")(analyze_tokens_command)
    app.add_typer(analyze_app, name="analyze")
    bench_app.command("taq")(bench_taq_command)
