"""`personalq quantize` and `personalq analyze tokens`: thin shells over personalq.taq."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated

import typer

from personalq.cli_errors import fail


def _fail(message: str) -> None:
    """TAQ's commands refuse with exit status 2 (a usage error), as they always have."""
    fail(message, code=2)


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
    model: Annotated[str, typer.Argument(help="Folder of a diffusers Stable Diffusion 1.5 / SDXL pipeline.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the quantized UNet (safetensors + taq.json).")],
    w: Annotated[int, typer.Option("--w", help="Weight bits: 8, 4 or 2 (16/32 = float).")] = 8,
    a: Annotated[int, typer.Option("--a", help="Activation bits: 2..8 (16/32 = float).")] = 8,
    quantizer: Annotated[str, typer.Option(help="Grid of the cross-attention probabilities: linear or log.")] = "linear",
    protect: Annotated[str, typer.Option(help="Full-precision tokens: trigger, bos, trigger+bos or none.")] = "trigger",
    calibration: Annotated[str, typer.Option(help="static (calibrated scales, stored) or dynamic (per call).")] = "static",
    trigger: Annotated[list[str] | None, typer.Option(help="Trigger token(s) of the checkpoint; repeat for several.")] = None,
    class_noun: Annotated[str, typer.Option(help="Class noun used in the calibration prompts.")] = "dog",
    prompts: Annotated[int, typer.Option(help="Number of calibration prompts.")] = 64,
    steps: Annotated[int, typer.Option(help="Denoising steps per calibration prompt.")] = 10,
):
    """Quantize a pipeline's UNet with TAQ and save it (load it with personalq.taq.load_quantized)."""
    from personalq.taq import (
        QuantConfig,
        calibration_prompts,
        quantize,
        resident_weight_bytes,
        save_quantized,
    )

    triggers = trigger or ["<sks>"]
    try:
        config = QuantConfig(w_bits=w, a_bits=a, quantizer=quantizer, protect=protect, calibration=calibration)
        prompt_list = calibration_prompts(prompts, trigger=triggers[0], class_noun=class_noun)
    except ValueError as error:
        _fail(str(error))
    pipe = _load_pipeline(model)
    before = resident_weight_bytes(pipe.unet)
    quantize(pipe, config, calibration_prompts=prompt_list, triggers=triggers, num_inference_steps=steps)
    after = resident_weight_bytes(pipe.unet)
    save_quantized(pipe, out)
    typer.echo(f"{config.name} ({quantizer}, protect={protect}): UNet {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB ({before / after:.2f}x), saved to {out}")


def analyze_tokens_command(
    model: Annotated[list[str], typer.Option("--model", help="Pipeline folder; repeat to aggregate over checkpoints.")],
    prompt: Annotated[str, typer.Option(help='Prompt with the trigger, e.g. "a <sks> sitting in the park".')],
    out: Annotated[Path, typer.Option("--out", help="Folder for tokens.csv, summary.md and the bar charts.")],
    bits: Annotated[int, typer.Option(help="Bits of the one token's K/V rows (2..8).")] = 4,
    trigger: Annotated[list[str] | None, typer.Option(help="Trigger(s); default: every <...> word in the prompt.")] = None,
    seed: Annotated[list[int] | None, typer.Option(help="Seeds; repeat for several (default 0 and 1).")] = None,
    steps: Annotated[int, typer.Option(help="Denoising steps per image.")] = 10,
    guidance: Annotated[float, typer.Option(help="Classifier-free guidance scale.")] = 7.5,
    scorer: Annotated[str | None, typer.Option(help="Image-text scorer as module:function, called (PIL image, text) -> float.")] = None,
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
    records = analyze_tokens(pipes, prompt, trigger, bits=bits, seeds=tuple(seed or (0, 1)), num_inference_steps=steps, guidance_scale=guidance, scorer=score_fn)
    if not any(r.is_trigger for r in records):
        typer.echo("warning: no trigger found in the prompt; every token is reported as an ordinary token", err=True)
    for path in write_report(records, out, bits):
        typer.echo(str(path))


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.command("quantize")(quantize_command)
    analyze_app = typer.Typer(help="Analyses that write tables and charts.", no_args_is_help=True)
    analyze_app.command("tokens")(analyze_tokens_command)
    app.add_typer(analyze_app, name="analyze")
