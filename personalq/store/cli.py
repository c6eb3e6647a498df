"""`personalq repo ...`: a thin Typer front over `RepoStore`.

Every command prints a readable rich table by default and JSON with `--json`. A refusal prints one
line on stderr and exits with status 1. Imports that refuse some entries still add the rest, but
exit with 1 so scripts notice. Text that came from users (ids, triggers, descriptions, reasons) is
printed literally, as `rich.text.Text`: `[/x]` in an id is shown, never read as markup.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from personalq.cli_errors import fail as _fail

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")]
HomeOption = Annotated[
    Optional[Path], typer.Option("--home", help="Data directory (default: $PERSONALQ_HOME or repo_store/).", show_default=False)
]


def _open(home: Path | None, repair_files: bool = True):
    """The repository as the app opens it (crash repair, the demo imported into an empty one, uploads
    checked against the configured base); `repair_files=False` opens it as it is, for `repo check`."""
    from personalq.library import open_repository, saved_settings
    from personalq.service.settings import SettingsError
    from personalq.store import RepoStore, StoreError

    try:
        if not repair_files:
            return RepoStore.open(home, repair_files=False)
        return open_repository(home, saved_settings(home).base_model).repo
    except (StoreError, SettingsError) as error:
        _fail(str(error))


def _literal(value: object):
    """User text as a rich renderable that is never parsed as markup."""
    from rich.text import Text

    return Text("" if value is None else str(value))


def _card_json(card, home: Path) -> dict:
    entry = card.to_catalog_entry(home)
    entry["added_at"] = card.added_at.isoformat()
    entry["updated_at"] = card.updated_at.isoformat()
    entry["raw_metadata"] = card.raw_metadata
    return entry


def _print_cards(cards, as_json: bool, home: Path) -> None:
    if as_json:
        typer.echo(json.dumps([card.to_catalog_entry(home) for card in cards], ensure_ascii=False, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(cards)} checkpoint(s)")
    for column in ("id", "trigger", "category", "style", "created", "v", "kind", "base"):
        table.add_column(column, overflow="fold")
    for card in cards:
        cells = (
            card.id, card.trigger, card.category, ", ".join(card.style_tags), card.created_at.date().isoformat(),
            card.version, card.kind, card.base_model,
        )
        table.add_row(*map(_literal, cells))
    Console().print(table)


def _print_report(report, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
    else:
        from rich.console import Console

        console = Console(highlight=False, soft_wrap=True)
        console.print(f"added {len(report.added)}, skipped {len(report.skipped)}, refused {len(report.refused)}")
        for source, reason in report.skipped:
            console.print(_literal(f"  skipped {source}: {reason}"))
        for source, reason in report.refused:
            console.print(_literal(f"  refused {source}: {reason}"))
    if report.refused:
        raise typer.Exit(1)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    repo = typer.Typer(help="The checkpoint repository: catalog, files and search indexes.", no_args_is_help=True)
    app.add_typer(repo, name="repo")

    @repo.command("add")
    def add(
        file: Annotated[Path, typer.Argument(help="A .safetensors checkpoint (DreamBooth, LoRA or textual inversion).")],
        meta: Annotated[Optional[Path], typer.Option("--meta", help="Sidecar YAML/JSON with context-tuple keys; wins over the file header.")] = None,
        preview: Annotated[Optional[list[Path]], typer.Option("--preview", help="Preview image (repeatable).")] = None,
        as_json: JsonOption = False,
        home: HomeOption = None,
    ) -> None:
        """Copy one checkpoint into the store, prefilled from its safetensors header."""
        from personalq.store import StoreError

        store = _open(home)
        try:
            card = store.add(file, meta=meta, previews=preview or [])
        except StoreError as error:
            _fail(str(error))
        if as_json:
            typer.echo(json.dumps(_card_json(card, store.files_root), ensure_ascii=False, indent=1))
        else:
            typer.echo(f"added {card.id} ({card.kind or 'unknown kind'}, {card.base_model or 'unknown base'}), trigger {card.trigger}")

    @repo.command("import")
    def import_dir(
        directory: Annotated[Path, typer.Argument(help="Folder of name.safetensors with name.yaml and name.png beside them.")],
        as_json: JsonOption = False,
        home: HomeOption = None,
    ) -> None:
        """Add every checkpoint in a folder; report what was added, skipped and refused."""
        from personalq.store import StoreError

        store = _open(home)
        try:
            report = store.import_dir(directory, progress=True)
        except StoreError as error:
            _fail(str(error))
        _print_report(report, as_json)

    @repo.command("load-catalog")
    def load_catalog(
        catalog: Annotated[Path, typer.Argument(help="Catalog JSONL: one context tuple per line (metadata only).")],
        as_json: JsonOption = False,
        home: HomeOption = None,
    ) -> None:
        """Add the entries of a catalog JSONL file (see docs/repo-prompts.md)."""
        from personalq.store import StoreError

        store = _open(home)
        try:
            report = store.load_catalog(catalog, progress=True)
        except StoreError as error:
            _fail(str(error))
        _print_report(report, as_json)

    @repo.command("list")
    def list_cards(
        category: Annotated[Optional[str], typer.Option(help="Only this category.")] = None,
        style: Annotated[Optional[str], typer.Option(help="Only checkpoints with this style tag.")] = None,
        created_from: Annotated[Optional[str], typer.Option("--from", help="Created on or after (ISO date).")] = None,
        created_to: Annotated[Optional[str], typer.Option("--to", help="Created on or before (ISO date or date-time).")] = None,
        text: Annotated[Optional[str], typer.Option(help="Substring of the id, description, triggers or tags.")] = None,
        as_json: JsonOption = False,
        home: HomeOption = None,
    ) -> None:
        """List checkpoints, oldest first."""
        from datetime import date

        from personalq.store.card import to_utc

        def parse(value: str | None, name: str):
            """A bare date keeps its whole day (for --to); a date-time is taken as given."""
            if value is None:
                return None
            try:
                return date.fromisoformat(value) if len(value) == 10 else to_utc(value)
            except ValueError:
                _fail(f"--{name}: {value!r} is not an ISO-8601 date or date-time")

        store = _open(home)
        cards = store.list(
            category=category, style=style, created_from=parse(created_from, "from"), created_to=parse(created_to, "to"), text=text
        )
        _print_cards(cards, as_json, store.files_root)

    @repo.command("show")
    def show(checkpoint_id: Annotated[str, typer.Argument(metavar="ID")], as_json: JsonOption = False, home: HomeOption = None) -> None:
        """Everything the catalog holds about one checkpoint."""
        store = _open(home)
        try:
            card = store.get(checkpoint_id)
        except KeyError:
            _fail(f"no checkpoint {checkpoint_id!r} in {store.home}")
        data = _card_json(card, store.files_root)
        if as_json:
            typer.echo(json.dumps(data, ensure_ascii=False, indent=1))
            return
        from rich.console import Console
        from rich.table import Table

        table = Table(show_header=False, title=_literal(card.id))
        for key, value in data.items():
            if key == "raw_metadata":
                value = json.dumps(value, ensure_ascii=False)[:400]
            elif isinstance(value, list):
                value = ", ".join(map(str, value))
            table.add_row(key, _literal(value))
        Console().print(table)

    @repo.command("remove")
    def remove(
        checkpoint_id: Annotated[str, typer.Argument(metavar="ID")],
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
        home: HomeOption = None,
    ) -> None:
        """Delete a checkpoint: catalog row, files and index entries."""
        store = _open(home)
        if checkpoint_id not in store:
            _fail(f"no checkpoint {checkpoint_id!r} in {store.home}")
        if not yes and not typer.confirm(f"Remove {checkpoint_id} and its files?"):
            raise typer.Exit(1)
        store.remove(checkpoint_id)
        typer.echo(f"removed {checkpoint_id}")

    @repo.command("check")
    def check(
        repair: Annotated[bool, typer.Option("--repair", help="Remove orphan files and drop rows whose files are gone.")] = False,
        as_json: JsonOption = False,
        home: HomeOption = None,
    ) -> None:
        """Check that every stored file has its catalog row and every row has its files."""
        store = _open(home, repair_files=False)
        report = store.check_files(repair=repair)
        if as_json:
            typer.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
        else:
            from rich.console import Console

            console = Console(highlight=False, soft_wrap=True)
            problems = [f"orphan file {p}" for p in report.orphan_files]
            problems += [f"temporary file {p}" for p in report.temporary_files]
            problems += [f"{i}: missing {p}" for i, p in report.missing_files]
            verb = "repaired" if report.repaired else "found"
            console.print(_literal(f"ok: {len(store)} checkpoint(s), files and rows agree" if report.ok else f"{verb} {len(problems)} problem(s)"))
            for line in problems:
                console.print(_literal(f"  {line}"))
        if not report.ok and not report.repaired:
            raise typer.Exit(1)

    @repo.command("reindex")
    def reindex(home: HomeOption = None) -> None:
        """Rebuild the dense and sparse indexes from the catalog."""
        store = _open(home)
        store.reindex(progress=True)
        typer.echo(f"reindexed {len(store)} checkpoint(s)")

    @repo.command("export")
    def export(
        output: Annotated[Path, typer.Argument(metavar="FILE", help="Catalog JSONL to write.")],
        home: HomeOption = None,
    ) -> None:
        """Write the catalog as JSONL (the format load-catalog reads)."""
        store = _open(home)
        try:
            count = store.export_catalog(output)
        except OSError as error:
            _fail(f"{output}: cannot write ({error.strerror or error})")
        typer.echo(f"wrote {count} entries to {output}")
