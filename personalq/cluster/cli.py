"""`personalq serve --ray` and `personalq bench route`: thin commands over personalq.cluster and the route simulation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from personalq.cli_errors import fail


def _fail(message: str) -> None:
    """These commands refuse with exit status 2 (a usage error)."""
    fail(message, code=2)


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
    max_ongoing: Annotated[int, typer.Option(help="Ongoing requests per replica past which the multiplexed router looks elsewhere (Ray's default: 5).")] = 2,
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


def serve(
    ray: Annotated[bool, typer.Option("--ray", help="Deploy the renderer on a Ray cluster (the only mode of this command).")] = False,
    replicas: Annotated[int, typer.Option(help="Renderer replicas.")] = 2,
    address: Annotated[str | None, typer.Option(help="An existing cluster ('auto', 'ray://host:10001'); default $PERSONALQ_RAY_ADDRESS, else a local cluster for as long as this command runs.")] = None,
    base_model: Annotated[str, typer.Option(help="pq-nano, a hub id, a diffusers folder or a single-file checkpoint.")] = "pq-nano",
    budget: Annotated[float | None, typer.Option("--budget-mib", help="Resident byte budget of each replica, MiB (default: unbounded).")] = None,
    models_per_replica: Annotated[int, typer.Option(help="(checkpoint, setting) variants each replica keeps for routing; match it to the budget.")] = 8,
    replica_cpus: Annotated[float, typer.Option(help="CPUs Ray reserves for each replica.")] = 1.0,
    device: Annotated[str | None, typer.Option(help="cuda, cpu, ... on each replica (default: CUDA when present).")] = None,
) -> None:
    """Serve rendering from replicas that each hold a byte budget of checkpoint variants (Ray Serve, multiplexed)."""
    if not ray:
        _fail("one machine needs no server: run `python app.py` (the app renders in-process); pass --ray to deploy on Ray")
    if replicas < 1 or models_per_replica < 1:
        _fail("--replicas and --models-per-replica must be at least 1")
    from personalq.cluster.client import ray_address
    from personalq.cluster.deployment import ReplicaOptions, start

    address = address or ray_address()
    serving = {"base_model": base_model, "device": device,
               "memory_budget_bytes": None if budget is None else int(budget * 2**20)}
    start(ReplicaOptions(serving=serving, models_per_replica=models_per_replica), replicas, address, replica_cpus)
    typer.echo(f"{replicas} renderer replicas ready; render through them with PERSONALQ_RAY_ADDRESS={address or 'auto'}")
    if address is None:  # the local cluster lives as long as this process
        typer.echo("local cluster: Ctrl-C (or SIGTERM) stops it")
        _wait_for_stop_signal()
        import ray as ray_core
        from ray import serve as ray_serve

        ray_serve.shutdown()
        ray_core.shutdown()


def _wait_for_stop_signal() -> None:
    """Block until SIGINT or SIGTERM; Ray's driver replaces Python's default handlers, so set our own."""
    import signal
    import threading

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.command("serve")(serve)
    bench_app.command("route")(bench_route)
