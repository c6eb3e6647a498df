"""The `personalq` command: a thin Typer front over the library.

Each capability registers its own commands from its subpackage's `cli` module; heavy imports
(torch, diffusers) stay inside the command functions so `personalq --help` stays fast.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(help="Select, quantize and serve personalized text-to-image checkpoints.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks: commands that print figures.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

# Each module defines `register(app, bench_app)`.
COMMAND_MODULES = (
    "personalq.personalize.cli",
    "personalq.demo.cli",
    "personalq.taq.cli",
    "personalq.serving.cli",
    "personalq.store.cli",
    "personalq.eval.cli",
    "personalq.nano.cli",
    "personalq.checkin.cli",
    "personalq.cluster.cli",
)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app, bench_app)


_register_all()


def main() -> None:
    app()
