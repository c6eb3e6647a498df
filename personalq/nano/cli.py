"""`personalq bench nano`: the PQ-Nano figures (alignment, FD-EffNet, judge accuracy, speed)."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("nano")
    def bench_nano(
        n: int = typer.Option(500, help="Held-out world captions to generate and score."),
        seed: int = typer.Option(2024, help="Seed of the held-out captions and of the sampling noise."),
        clip: Path = typer.Option(None, help="A local CLIP model folder: also report CLIP score."),
        grid: Path = typer.Option(None, help="Save a captioned sample grid PNG here."),
        json_out: Path = typer.Option(None, "--json", help="Also write every figure to this JSON file."),
        threads: int = typer.Option(0, help="torch CPU threads (0: torch's default)."),
        device: str = typer.Option("cpu", help="Where to generate the images (speed is always timed on CPU)."),
    ):
        """Score the shipped PQ-Nano against real world renders and a random-weight twin."""
        import torch

        from personalq.eval.nano_bench import format_report, run_nano_bench

        if n < 2:
            raise typer.BadParameter("need at least 2 captions for a Frechet distance", param_hint="--n")
        if threads:
            torch.set_num_threads(threads)
        report = run_nano_bench(n=n, seed=seed, clip_model=clip, grid_path=grid, device=device, log=lambda m: typer.echo(m, err=True))
        typer.echo(format_report(report))
        if json_out:
            json_out.write_text(json.dumps(report, indent=2))
