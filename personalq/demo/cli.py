"""`personalq bench personalize`: trigger fidelity and prior preservation of the demo repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from personalq.config import ASSETS_DIR


def bench_personalize(
    repo: Annotated[Path, typer.Option("--repo", help="folder of built demo checkpoints")] = ASSETS_DIR / "demo_repo",
    only: Annotated[list[str] | None, typer.Option("--only", help="checkpoint ids to measure (default: every one built)")] = None,
    n: Annotated[int, typer.Option("--n", help="images per checkpoint with the trigger, and as many without")] = 8,
    grid: Annotated[Path | None, typer.Option("--grid", help="write a PNG grid: rows checkpoints, columns trigger vs no trigger")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the figures as JSON")] = False,
    device: Annotated[str | None, typer.Option("--device", help="cpu or cuda (default: cuda when present)")] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    results: Annotated[Path | None, typer.Option("--results", help="folder that keeps each checkpoint's measurement; a rerun reuses them and measures only what is new or changed")] = None,
) -> None:
    """Per checkpoint and on average: looks with the trigger, without it, and class subject accuracy vs the base model."""
    import torch

    from personalq.demo.build import is_built, sampling_kwargs
    from personalq.demo.concepts import demo_concepts
    from personalq.demo.fidelity import fidelity_grid, measure_fidelity
    from personalq.nano import load_pipeline
    from personalq.nano.judge import Judge

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    concepts = {c.id: c for c in demo_concepts()}
    unknown = sorted(set(only or []) - set(concepts))
    if unknown:
        typer.echo(f"error: unknown demo checkpoint(s) {', '.join(unknown)}; ids look like bear-v1", err=True)
        raise typer.Exit(2)
    checkpoints = [(repo / f"{cid}.safetensors", c) for cid, c in concepts.items() if (not only or cid in only) and is_built(repo, cid)]
    if not checkpoints:
        typer.echo(f"error: no demo checkpoints in {repo}; build them with `python -m personalq.demo.build`", err=True)
        raise typer.Exit(2)
    run = measure_fidelity(load_pipeline(device), Judge.load(device=device), checkpoints, n=n, seed=seed, sampling=sampling_kwargs(), log=(lambda _: None) if as_json else typer.echo, results_dir=results)
    averages = run.averages()
    if as_json:
        typer.echo(json.dumps({"n": n, "checkpoints": [r.as_dict() for r in run.rows], "average": averages}, indent=2))
    else:
        typer.echo(
            f"average over {len(run.rows)} checkpoints (n={n}): looks with trigger {averages['with_trigger']:.3f} (target >= 0.80; "
            f"colour alone {averages['with_trigger_color']:.3f}, accessory alone {averages['with_trigger_accessory']:.3f}), "
            f"without {averages['without_trigger']:.3f} (target <= 0.20); class subject accuracy {averages['class_subject_accuracy']:.3f} "
            f"vs base {averages['base_subject_accuracy']:.3f} (target: within 0.05); "
            f"references: the base model told the looks in words instead of the trigger {averages['described_on_base']:.3f}, "
            f"the instance images through PQ-Nano's autoencoder {averages['instances_through_vae']:.3f}"
        )
    if grid:
        typer.echo(f"grid: {fidelity_grid(run, grid)}", err=as_json)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    bench_app.command("personalize")(bench_personalize)
