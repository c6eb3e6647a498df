"""`personalq select`, `personalq chat`, `personalq bench select|checkin-generate|checkin-scale`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from personalq.cli_errors import fail as _fail

NowOption = Annotated[Optional[str], typer.Option("--now", help="Reference time for 'yesterday', 'last week' (ISO-8601; default: now).")]
HomeOption = Annotated[Optional[Path], typer.Option("--home", help="Data directory (default: $PERSONALQ_HOME or repo_store/).", show_default=False)]
LlmOption = Annotated[Optional[str], typer.Option("--llm-model", help="LiteLLM model for reranking (default: $PERSONALQ_CHECKIN_LLM; none: rules only).")]


def _checkin(home: Path | None, k: int, llm_model: str | None):
    """Check-in over HOME opened the way the app opens it (crash repair, the demo into an empty catalog)."""
    import os

    from personalq.checkin.checkin import CheckIn
    from personalq.checkin.rerank import ENV_MODEL, LiteLLMReranker
    from personalq.library import open_repository, saved_settings

    store = open_repository(home, saved_settings(home).base_model).repo
    model = llm_model or os.environ.get(ENV_MODEL)
    return CheckIn(store, k=k, reranker=LiteLLMReranker(model) if model else None)


def _parse_now(now: str | None):
    from personalq.checkin.checkin import _utc

    try:
        return _utc(now)
    except ValueError:
        _fail(f"--now {now!r} is not an ISO-8601 date or date-time")


def _show(result, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
        return
    if result.action == "select":
        typer.echo(f"{result.checkpoint_id}  ({result.reason})")
        typer.echo(f"prompt: {result.rewritten_prompt}")
    elif result.action == "clarify":
        typer.echo(result.question)
        for i, option in enumerate(result.options, start=1):
            typer.echo(f"  {i}. {option.label}")
    else:
        typer.echo(f"no match: {result.reason}")
        if result.nearest:
            typer.echo("nearest: " + ", ".join(result.nearest))


def select(
    request: Annotated[str, typer.Argument(help="What you want, in your words: 'the April dog model on a beach'.")],
    now: NowOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    k: Annotated[int, typer.Option("--k", help="Retrieval depth (top-K of the fused ranking).")] = 10,
    home: HomeOption = None,
    llm_model: LlmOption = None,
) -> None:
    """Pick the checkpoint a request means, or ask which one, or say none fits."""
    if not request.strip():
        _fail("the request is empty")
    when = _parse_now(now)
    _show(_checkin(home, k, llm_model).ask(request, now=when), as_json)


def chat(now: NowOption = None, home: HomeOption = None, llm_model: LlmOption = None) -> None:
    """Talk to Check-in in the terminal: a request, then answers to its questions (empty line quits)."""
    when = _parse_now(now)
    checkin = _checkin(home, 10, llm_model)
    conversation = None
    while True:
        text = typer.prompt("you", default="", show_default=False).strip()
        if not text:
            return
        if conversation is not None and conversation.last is not None and conversation.last.action == "clarify":
            result = conversation.answer(text)
        else:
            conversation = checkin.conversation(now=when)
            result = conversation.ask(text)
        _show(result, as_json=False)


SPLIT_CHOICES = ("dev", "test", "all", "extra", "holdout", "none")


def _read_requests(prompts: Path) -> list[dict]:
    from personalq.eval.checkin_bench import read_jsonl

    if not prompts.is_file():
        _fail(f"{prompts}: no such file")
    try:
        requests = read_jsonl(prompts)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        _fail(f"{prompts}: not JSONL ({error})")
    for number, req in enumerate(requests, start=1):
        missing = [key for key in ("instance_id", "query", "ground_truth") if not isinstance(req, dict) or key not in req]
        if missing:
            _fail(f"{prompts}: request {number} lacks {', '.join(missing)}")
    return requests


def _bench_sets(catalog: Path | None, prompts: Path | None, split: str) -> list[tuple[str, Path, list[dict]]]:
    """(name, catalog, requests) for each set to score: Repo-Prompts when given, then each hand-written catalog's splits."""
    from personalq.eval.checkin_sets import catalog_path, load_split, named_sets

    if (catalog is None) != (prompts is None):
        _fail("--catalog and --prompts go together")
    if split not in SPLIT_CHOICES:
        _fail(f"--split {split}: choose {', '.join(SPLIT_CHOICES)}")
    sets = []
    if catalog is not None:
        if not catalog.is_file():
            _fail(f"{catalog}: no such file")
        sets.append(("repo-prompts", catalog, _read_requests(prompts)))
    if split != "none":
        sets += [(f"{name}/{part}", catalog_path(name), load_split(name, part)) for name, part in named_sets(split)]
    if not sets:
        _fail("nothing to score: give --catalog and --prompts, or --split dev|test|all|extra")
    return sets


def _bench_store(catalog_file: Path, home: Path | None, k: int, quiet: bool):
    """(store, Check-in, triggers) over a catalog: in HOME, else in a store kept per catalog content under $PERSONALQ_HOME/bench."""
    import hashlib

    from personalq.checkin.checkin import CheckIn
    from personalq.config import personalq_home
    from personalq.store import RepoStore

    digest = hashlib.sha256(catalog_file.read_bytes()).hexdigest()[:12]
    store = RepoStore.open(home or personalq_home() / "bench" / f"catalog-{digest}")
    loaded = store.load_catalog(catalog_file, progress=not quiet)
    if loaded.refused:
        typer.echo(f"warning: {len(loaded.refused)} line(s) of {catalog_file} refused, e.g. {loaded.refused[0]}", err=True)
    return store, CheckIn(store, k=k), {c.id: c.trigger for c in store.cards()}


def _per_set(path: Path, set_name: str, method: str, sets: list, methods: list) -> Path:
    """--out/--baseline name one file per set and method when a run has several: out.<set>.<method>.jsonl."""
    parts = ([set_name.replace("/", "-")] if len(sets) > 1 else []) + ([method] if len(methods) > 1 else [])
    return path.with_name(".".join([path.stem, *parts]) + path.suffix) if parts else path


def _read_predictions(path: Path) -> list:
    from personalq.eval.checkin_bench import Prediction, read_jsonl

    try:
        return [Prediction(**row) for row in read_jsonl(path)]
    except (OSError, ValueError, TypeError) as error:  # missing, not JSONL, or not rows --out wrote
        _fail(f"--baseline {path}: {type(error).__name__}: {error}")


def _write_predictions(target: Path, predictions) -> None:
    from dataclasses import asdict

    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8") as f:
        for p in predictions:
            f.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")


def bench_select(
    catalog: Annotated[Optional[Path], typer.Option("--catalog", help="Repo-Prompts catalog JSONL (docs/repo-prompts.md).")] = None,
    prompts: Annotated[Optional[Path], typer.Option("--prompts", help="Repo-Prompts request JSONL (with --catalog).")] = None,
    split: Annotated[str, typer.Option("--split", help="Hand-written sets to score: dev, test, all (dev and test apart), extra (more tuning requests), holdout (only scored, like test) or none.")] = "all",
    now: NowOption = None,
    method: Annotated[str, typer.Option("--method", help="random|dense|bm25|hybrid|checkin|checkin-llm|all")] = "checkin",
    out: Annotated[Optional[Path], typer.Option("--out", help="Write one prediction per request (JSONL).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print scores as JSON.")] = False,
    home: Annotated[Optional[Path], typer.Option("--home", help="Store for the --catalog set (default: one per catalog under $PERSONALQ_HOME/bench).", show_default=False)] = None,
    k: Annotated[int, typer.Option("--k")] = 10,
    llm_model: LlmOption = None,
    threads: Annotated[int, typer.Option("--threads", help="Torch CPU threads (the latency target is for one core).")] = 1,
    baseline: Annotated[Optional[Path], typer.Option("--baseline", help="Predictions an earlier run wrote with --out (same name): "
                                                     "compare request by request (exact McNemar).")] = None,
) -> None:
    """Score selection methods on Repo-Prompts (--catalog/--prompts) and on the hand-written dev and test sets,
    per catalog: every score of the spec, latency, and accuracy per phrase class."""
    import os

    import torch

    from personalq.eval.checkin_bench import (METHODS, class_accuracy, format_class_table, format_table, make_method, paired_with,
                                              run_method, score)
    from personalq.checkin.rerank import ENV_MODEL

    torch.set_num_threads(threads)
    methods = list(METHODS) if method == "all" else [method]
    if any(m not in METHODS for m in methods):
        _fail(f"unknown method {method!r}; choose one of {', '.join(METHODS)} or all")
    sets = _bench_sets(catalog, prompts, split)
    default_now = _parse_now(now)
    model = llm_model or os.environ.get(ENV_MODEL)
    if method == "checkin-llm" and not model:
        _fail(f"checkin-llm needs --llm-model or ${ENV_MODEL}")
    if baseline is not None:  # refused before any set runs, not after the first
        for set_name, _, _ in sets:
            for name in methods:
                if not _per_set(baseline, set_name, name, sets, methods).is_file():
                    _fail(f"--baseline: no predictions at {_per_set(baseline, set_name, name, sets, methods)}")
    stores: dict[Path, tuple] = {}
    report: dict[str, dict[str, dict]] = {}
    for set_name, catalog_file, requests in sets:
        if catalog_file not in stores:
            stores[catalog_file] = _bench_store(catalog_file, home if set_name == "repo-prompts" else None, k, as_json)
        store, checkin, triggers = stores[catalog_file]
        rows: dict[str, dict] = {}
        for name in methods:
            if name == "checkin-llm" and not model:
                continue
            predictions = run_method(make_method(name, store, checkin, llm_model=model), requests, default_now)
            rows[name] = score(requests, predictions, triggers)
            if set_name != "repo-prompts":
                rows[name]["classes"] = class_accuracy(requests, predictions)
            if out is not None:
                _write_predictions(_per_set(out, set_name, name, sets, methods), predictions)
            if baseline is not None:
                try:
                    rows[name]["paired"] = paired_with(requests, predictions, _read_predictions(_per_set(baseline, set_name, name, sets, methods)))
                except ValueError as error:  # predictions of other requests
                    _fail(f"--baseline: {error}")
        report[set_name] = rows
    if as_json:
        typer.echo(json.dumps(report, indent=1))
        return
    for set_name, rows in report.items():
        typer.echo(f"\n## {set_name} ({next(iter(rows.values()))['requests']} requests)\n")
        typer.echo(format_table(rows))
        for name, scores in rows.items():
            if "paired" in scores:
                paired = scores["paired"]
                typer.echo(f"\n{name} against --baseline, right all the way: {paired['baseline_right']} -> {paired['right']}; "
                           f"only now {paired['only_now']}, only before {paired['only_baseline']}, exact McNemar p = {paired['mcnemar_p']:.2g}")
        if set_name != "repo-prompts":
            typer.echo("\n" + format_class_table(rows))
    if method == "all" and not model:
        typer.echo(f"(checkin-llm skipped: no model configured; set ${ENV_MODEL} or --llm-model)")


def bench_generate(
    out_dir: Annotated[Path, typer.Option("--out-dir", help="Where catalog.jsonl and prompts.jsonl go.")],
    vocabulary: Annotated[str, typer.Option("--vocabulary", help="demo (the 20 issue categories) or unseen (for generalization).")] = "demo",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    versions: Annotated[int, typer.Option("--versions", help="Versions per category.")] = 50,
    singles: Annotated[int, typer.Option("--singles")] = 350,
    ambiguous: Annotated[int, typer.Option("--ambiguous")] = 100,
    no_match: Annotated[int, typer.Option("--no-match")] = 50,
) -> None:
    """Write a seeded Repo-Prompts catalog and request set with oracle ground truth."""
    from personalq.checkin.repo_prompts import generate
    from personalq.checkin.repo_prompts.vocabularies import VOCABULARIES

    if vocabulary not in VOCABULARIES:
        _fail(f"unknown vocabulary {vocabulary!r}; choose {', '.join(VOCABULARIES)}")
    data = generate(vocabulary, seed, versions=versions, singles=singles, ambiguous=ambiguous, no_match=no_match)
    data.write(out_dir / "catalog.jsonl", out_dir / "prompts.jsonl")
    typer.echo(f"{len(data.catalog)} checkpoints -> {out_dir / 'catalog.jsonl'}; {len(data.requests)} requests -> {out_dir / 'prompts.jsonl'}")


def bench_scale(
    sizes: Annotated[str, typer.Option("--sizes", help="Comma-separated catalog sizes (metadata-only).")] = "1000,10000",
    requests_per_size: Annotated[int, typer.Option("--requests", help="Timed requests per size.")] = 100,
    work_dir: Annotated[Optional[Path], typer.Option("--work-dir", help="Where the generated stores go (default: $PERSONALQ_HOME/bench).")] = None,
    threads: Annotated[int, typer.Option("--threads")] = 1,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Check-in latency p50/p95 as the catalog grows (20 categories x N/20 versions each)."""
    import torch

    from personalq.eval.checkin_bench import make_method, run_method, score
    from personalq.checkin.checkin import CheckIn
    from personalq.checkin.repo_prompts import generate
    from personalq.config import personalq_home
    from personalq.store import RepoStore

    torch.set_num_threads(threads)
    work_dir = work_dir or personalq_home() / "bench"
    rows = {}
    for size in (int(s) for s in sizes.split(",")):
        if size < 20 or size % 20:
            _fail(f"size {size}: must be a positive multiple of 20")
        folder = work_dir / f"scale-{size}"
        share = requests_per_size // 5
        data = generate("demo", seed=size, versions=size // 20, singles=requests_per_size - 2 * share, ambiguous=share,
                        no_match=share, max_attempts=20 * requests_per_size)
        data.write(folder / "catalog.jsonl", folder / "prompts.jsonl")
        store = RepoStore.open(folder / "home")
        store.load_catalog(folder / "catalog.jsonl", progress=not as_json)
        checkin = CheckIn(store)
        predictions = run_method(make_method("checkin", store, checkin), data.requests, None)
        scores = score(data.requests, predictions)
        rows[size] = {"latency_ms_p50": scores["latency_ms_p50"], "latency_ms_p95": scores["latency_ms_p95"],
                      "decision_accuracy": scores["decision_accuracy"], "requests": len(data.requests)}
        if not as_json:
            typer.echo(f"{size:>7} checkpoints: p50 {rows[size]['latency_ms_p50']:.1f} ms, p95 {rows[size]['latency_ms_p95']:.1f} ms "
                       f"(decision_accuracy {rows[size]['decision_accuracy']:.3f}, {len(data.requests)} requests)")
    if as_json:
        typer.echo(json.dumps(rows, indent=1))


def bench_check_batch(
    folder: Annotated[Path, typer.Argument(help="A batch folder: catalog.jsonl, requests.jsonl and <catalog>.jsonl (docs/checkin-stranger-brief.md).")],
    beside: Annotated[Optional[list[Path]], typer.Argument(help="Catalogs other helpers are writing at the same time.", show_default=False)] = None,
) -> None:
    """Check a stranger-written batch before it joins the hand-written sets: its catalog's words in no code
    and no other catalog, and every request's annotation selecting exactly the answer written down."""
    from personalq.eval.stranger_batch import check_batch

    try:
        problems = check_batch(folder, [p for p in beside or () if p.resolve() != (folder / "catalog.jsonl").resolve()])
    except (OSError, ValueError) as error:  # no catalog.jsonl, or one that is no JSON lines
        _fail(f"{folder}: {error}")
    for problem in problems:
        typer.echo(problem)
    if problems:
        raise typer.Exit(1)
    typer.echo(f"OK: {folder} may join")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.command("select")(select)
    app.command("chat")(chat)
    bench_app.command("select")(bench_select)
    bench_app.command("checkin-generate")(bench_generate)
    bench_app.command("checkin-scale")(bench_scale)
    bench_app.command("checkin-batch")(bench_check_batch)
