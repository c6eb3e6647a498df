"""`personalq bench route` and `personalq serve --ray`: thin commands over personalq.cluster and the route simulation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _replica_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        _fail(f"--replicas takes comma-separated whole numbers, got {text!r}")
    if not counts or min(counts) < 1:
        _fail("--replicas needs at least one count, each at least 1")
    return counts


def bench_route(
    checkpoints: Annotated[int, typer.Option(help="Checkpoints in the catalog.")] = 10_000,
    replicas: Annotated[str, typer.Option(help="Comma-separated pool sizes to simulate.")] = "1,2,4,8,16,32,64",
    budget: Annotated[float, typer.Option("--budget-mib", help="Resident byte budget of each replica, MiB.")] = 4096.0,
    checkpoint_mib: Annotated[float, typer.Option(help="Median checkpoint size, MiB.")] = 150.0,
    size_spread: Annotated[float, typer.Option(help="Lognormal sigma of checkpoint sizes (0: all equal).")] = 0.5,
    zipf: Annotated[float, typer.Option(help="Zipf exponent of checkpoint popularity.")] = 1.1,
    render_s: Annotated[float, typer.Option(help="Seconds per render.")] = 2.0,
    load_s: Annotated[float, typer.Option(help="Extra seconds when the checkpoint is not resident.")] = 3.0,
    load: Annotated[float, typer.Option(help="Offered render utilization per replica (requests x render_s / replicas / s).")] = 0.3,
    requests_per_replica: Annotated[int, typer.Option(help="Simulated requests per replica.")] = 2_000,
    max_ongoing: Annotated[int, typer.Option(help="Ongoing requests past which the multiplexed router looks elsewhere.")] = 5,
    seed: Annotated[int, typer.Option()] = 0,
    plot_out: Annotated[Path, typer.Option("--plot", help="PNG file for the plot.")] = Path("route_bench.png"),
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the figures as JSON here.")] = None,
) -> None:
    """Simulate Zipf traffic over pools of replicas: multiplexed (Ray Serve) vs random routing."""
    import json

    from personalq.eval.route_bench import Workload, figures_json, figures_table, plot, sweep

    try:
        workload = Workload(checkpoints=checkpoints, zipf=zipf, checkpoint_mib=checkpoint_mib, size_spread=size_spread,
                            budget_mib=budget, render_s=render_s, load_s=load_s, load=load,
                            requests_per_replica=requests_per_replica, max_ongoing=max_ongoing, seed=seed)
        figures = sweep(workload, _replica_counts(replicas))
    except ValueError as error:
        _fail(str(error))
    typer.echo(figures_table(figures))
    typer.echo(f"plot: {plot(figures, plot_out)}")
    if json_out is not None:
        json_out.write_text(json.dumps(figures_json(workload, figures), indent=1))


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    bench_app.command("route")(bench_route)
