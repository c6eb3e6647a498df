"""`personalq generate`: a thin command over `PipelineManager`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from personalq.cli_errors import fail as _fail


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
            from personalq.library import open_repository

            store = open_repository(home, base_model).repo  # opened as the app opens it: repaired, the demo in an empty one
        from personalq.cluster.client import renderer_for  # the Ray deployment when PERSONALQ_RAY_ADDRESS is set

        manager = renderer_for(ServingConfig(base_model=base_model, device=device, dtype=dtype, single_file_config=single_file_config), store=store)
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


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.command("generate")(generate)
