"""`personalq generate` and `personalq bench serve`: thin commands over `PipelineManager`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def generate(
    prompt: Annotated[str, typer.Argument(help="The prompt; write the checkpoint's trigger where the subject goes.")],
    checkpoint: Annotated[str | None, typer.Option("--checkpoint", "-c", help="Checkpoint id in the store (none: the plain base).")] = None,
    setting: Annotated[str, typer.Option(help="FP32, FP16, BF16, W8A8, W4A8, W8A4 or W4A4 (full precision runs in --dtype).")] = "FP32",
    taq: Annotated[bool, typer.Option("--taq/--no-taq", help="Protect the trigger tokens when quantized.")] = True,
    seed: Annotated[int, typer.Option(help="Seed of the initial noise.")] = 0,
    steps: Annotated[int, typer.Option(help="Denoising steps.")] = 20,
    guidance: Annotated[float | None, typer.Option(help="Classifier-free guidance (default: the base model's).")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="PNG file to write.")] = Path("out.png"),
    base_model: Annotated[str, typer.Option(help="pq-nano, a hub id, a diffusers folder or a single-file checkpoint.")] = "pq-nano",
    single_file_config: Annotated[Path | None, typer.Option(help="Diffusers folder giving the configs of a single-file base.")] = None,
    device: Annotated[str | None, typer.Option(help="cuda, cpu, ... (default: CUDA when present).")] = None,
    dtype: Annotated[str | None, typer.Option(help="fp32, fp16 or bf16 (default: fp16 on CUDA, fp32 on CPU).")] = None,
    home: Annotated[Path | None, typer.Option(help="Data directory (default: $PERSONALQ_HOME or repo_store/).")] = None,
) -> None:
    """Generate one image through the serving layer."""
    from personalq.serving import (
        GenerationRequest,
        PipelineManager,
        ServingConfig,
        ServingError,
    )

    from personalq.serving.config import resolve_device_dtype
    from personalq.setting import get_setting

    try:  # refused before any model is loaded
        chosen = get_setting(setting, resolve_device_dtype(device, dtype)[0].type)
        if dtype is None and not chosen.quantized:
            dtype = chosen.dtype  # --setting BF16 alone serves in bfloat16
        resolve_device_dtype(device, dtype)
    except ValueError as error:
        _fail(str(error))
    try:
        store = None
        if checkpoint or home is not None:  # the store names the data directory the quantized cache goes to
            from personalq.store import RepoStore

            store = RepoStore.open(home)
        manager = PipelineManager(ServingConfig(base_model=base_model, device=device, dtype=dtype, single_file_config=single_file_config), store=store)
        result = manager.generate(
            GenerationRequest(prompt, checkpoint_id=checkpoint, setting=setting, taq=taq, steps=steps, guidance=guidance, seed=seed),
            progress=lambda step, total, message: typer.echo(f"\r{message} {step}/{total}", nl=False, err=True),
        )
    except (ServingError, ValueError) as error:
        _fail(str(error))
    typer.echo("", err=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    result.image.save(out)
    typer.echo(f"{out}  ({result.setting}, seed {result.seed}, {result.seconds:.2f} s, {result.resident_bytes / 2**20:.1f} MiB resident)")


def serve_bench(
    requests: Annotated[int, typer.Option(help="Requests to replay.")] = 200,
    checkpoints: Annotated[int, typer.Option(help="LoRA checkpoints in the repository.")] = 20,
    zipf: Annotated[float, typer.Option(help="Zipf exponent of checkpoint popularity.")] = 1.1,
    setting: Annotated[str, typer.Option(help="Bit-width setting of every request, or several (FP32,W8A8,W4A8) that requests take in turn.")] = "W8A8",
    model: Annotated[str, typer.Option(help="sd15-random (SD 1.5 UNet, random weights), pq-nano, or any base model.")] = "pq-nano",
    steps: Annotated[int, typer.Option(help="Denoising steps per request.")] = 20,
    size: Annotated[int | None, typer.Option(help="Image height and width (default: the model's).")] = None,
    memory_budget: Annotated[float | None, typer.Option(help="Cache budget in MiB (default: unbounded).")] = None,
    device: Annotated[str | None, typer.Option(help="cuda, cpu, ...")] = None,
    naive: Annotated[bool, typer.Option("--naive/--no-naive", help="Also run the naive load-from-disk server.")] = True,
    seed: Annotated[int, typer.Option()] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the figures as JSON here.")] = None,
    repo: Annotated[Path | None, typer.Option(help="Folder of built LoRA checkpoints for this model, e.g. assets/demo_repo (default: random-weight LoRAs).")] = None,
) -> None:
    """Replay a Zipf workload of LoRA requests: throughput, latency, switch time, peak resident bytes."""
    import json

    from personalq.serving import ServingError
    from personalq.serving.bench import bench_serve, figures_json, figures_table

    budget = None if memory_budget is None else int(memory_budget * 2**20)
    try:
        results = bench_serve(model, requests, checkpoints, zipf, setting, steps, budget, size, device, seed, naive,
                              repo=repo, log=lambda line: typer.echo(line, err=True))
    except (ServingError, ValueError) as error:
        _fail(str(error))
    typer.echo(figures_table(results))
    if budget is not None:
        typer.echo(f"memory budget: {memory_budget:.1f} MiB; PersonalQ peak resident {results[0].peak_resident_bytes / 2**20:.1f} MiB")
    if json_out is not None:
        json_out.write_text(json.dumps(figures_json(results), indent=1))


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.command("generate")(generate)
    bench_app.command("serve")(serve_bench)
