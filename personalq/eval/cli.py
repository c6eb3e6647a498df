"""Every `personalq bench ...` command but Check-in's: thin shells over the benchmark modules of personalq.eval."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Optional

import typer

from personalq.cli_errors import fail

# The bench commands exit with 2 on a refusal; `bench store` and `bench serve` with 1, as they always have.
_fail = functools.partial(fail, code=2)


def _guidance(model: str) -> float:
    """The guidance scale renders of `model` use: PQ-Nano's own, 7.5 for Stable Diffusion folders."""
    if model == "pq-nano":
        from personalq.nano import DEFAULT_GUIDANCE

        return DEFAULT_GUIDANCE
    return 7.5


def _load_model(model: str):
    """`pq-nano` (the shipped model) or a local diffusers Stable Diffusion folder, offline; plus its guidance."""
    if model == "pq-nano":
        from personalq.nano import load_pipeline

        return load_pipeline(), _guidance(model)
    if not (Path(model) / "model_index.json").is_file():
        _fail(f"{model} is neither 'pq-nano' nor a diffusers pipeline folder (no model_index.json)")
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(model, local_files_only=True, safety_checker=None, requires_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    return pipe, _guidance(model)


def _load_judge(path: Optional[Path]):
    from personalq.nano.judge import Judge

    try:
        return Judge.load(path) if path else Judge.load()
    except FileNotFoundError as error:
        _fail(str(error))


def _concepts(concepts_file: Optional[Path], count: int):
    from personalq.eval.quality_bench import DEMO_CONCEPTS, load_concepts

    path = concepts_file or DEMO_CONCEPTS
    try:
        found = load_concepts(path)
    except ValueError as error:
        hint = "" if concepts_file else " (the demo repository is not built yet: pass --concepts FILE)"
        _fail(f"{error}{hint}")
    return found[:count]


def bench_quality_command(
    quick: bool = typer.Option(False, "--quick", help="Small size (3 settings, 2 concepts, 10 steps): a few minutes on CPU."),
    model: str = typer.Option("pq-nano", "--model", help="'pq-nano' or a diffusers Stable Diffusion folder."),
    prompts: Optional[Path] = typer.Option(None, "--prompts", help="Trigger prompt templates, one per line with {trigger} (and {class_noun})."),
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Seeds per prompt (default: 2 quick, 3 full)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Denoising (and calibration) steps (default: 10 quick, 20 full)."),
    settings: Optional[str] = typer.Option(None, "--settings", help="Comma-separated settings, e.g. FP32,W8A8,W4A4 (default: the size's)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for cells/, results.json, report.md, grid.png."),
    concepts: Optional[Path] = typer.Option(None, "--concepts", help="JSON list of {name, trigger, class_noun, lora, looks}; default: the demo repository."),
    judge: Optional[Path] = typer.Option(None, "--judge", help="Judge folder (default: the shipped PQ-Nano judge)."),
    threads: int = typer.Option(1, "--threads", help="torch CPU threads."),
    per_image: bool = typer.Option(False, "--per-image", help="The paired per-image benchmark (issue 24): CSVs + paired tests."),
    checkpoints: int = typer.Option(30, "--checkpoints", help="--per-image: demo checkpoints (x --trigger-prompts x --seeds images)."),
    trigger_prompts: int = typer.Option(4, "--trigger-prompts", help="--per-image: trigger prompts per checkpoint."),
    methods: Optional[str] = typer.Option(None, "--methods", help="--per-image: comma-separated method names (default: all)."),
    csv_dir: Path = typer.Option(Path("docs/results/quality"), "--csv-dir", help="--per-image: where the per-setting CSVs go."),
    no_render: bool = typer.Option(False, "--no-render", help="--per-image: export the finished cells to --csv-dir and print the tables; render nothing."),
):
    """Trigger fidelity, alignment, FD-EffNet, bytes, BOPs and speed of FP vs plain PTQ vs start-token vs TAQ."""
    import dataclasses

    if per_image:
        from personalq.eval.paired_quality import run_command

        run_command(settings=settings, methods=methods, checkpoints=checkpoints, trigger_prompts=trigger_prompts,
                    seeds=seeds, steps=steps, out=out, csv_dir=csv_dir, judge=None if no_render else _load_judge(judge),
                    threads=threads, no_render=no_render, load_model=lambda: _load_model(model), guidance=_guidance(model), model_id=model,
                    concepts=_concepts(concepts, checkpoints), fail=_fail)
        from personalq.eval.quality_report import report  # reads the CSVs alone; it imports paired_quality, not back

        print(report(Path(csv_dir)), flush=True)
        return
    import time

    import torch

    from personalq.config import personalq_home
    from personalq.eval.quality_bench import DEFAULT, FP_SETTINGS, QUICK, BenchRun, JudgeScorer, bench_prompts, cells_for, write_report
    from personalq.taq.config import SETTINGS

    torch.set_num_threads(threads)
    size = QUICK if quick else DEFAULT
    for name, value in (("seeds", seeds), ("steps", steps)):
        if value is not None:
            if value < 1:
                _fail(f"--{name} {value}: need at least 1")
            size = dataclasses.replace(size, **{name: value})
    if settings is not None:
        names = tuple(s.strip().upper() for s in settings.split(",") if s.strip())
        unknown = [s for s in names if s not in SETTINGS]
        if not names or unknown:
            _fail(f"--settings {settings}: choose from {', '.join(SETTINGS)}")
        quantized = [s for s in names if s not in FP_SETTINGS]
        ablation = size.ablation_setting if size.ablation_setting in names else (quantized[-1] if quantized else None)
        if ablation is None:
            _fail(f"--settings {settings}: name at least one quantized setting")
        size = dataclasses.replace(size, settings=names, ablation_setting=ablation)
    if prompts is not None and not prompts.is_file():
        _fail(f"--prompts {prompts}: no such file")
    concept_list = _concepts(concepts, size.concepts)
    try:
        prompt_list = bench_prompts(concept_list, size, prompts)
    except ValueError as error:
        _fail(str(error))
    scorer = JudgeScorer(_load_judge(judge))
    pipe, guidance = _load_model(model)
    out = out or personalq_home() / "bench" / ("quality-quick" if quick else "quality")
    out.mkdir(parents=True, exist_ok=True)
    run = BenchRun(pipe, concept_list, prompt_list, scorer, size, out, guidance=guidance, model_id=str(model),
                   log=lambda line: typer.echo(line, err=True))
    t0 = time.perf_counter()
    rows = run.run(cells_for(size))
    paths = write_report(run, rows)
    typer.echo(f"{model}: {len(concept_list)} concepts, {len(prompt_list)} images per cell, {size.steps} steps, "
               f"{torch.get_num_threads()} CPU thread(s), {time.perf_counter() - t0:.0f} s")
    typer.echo(paths[1].read_text())
    for path in paths:
        typer.echo(str(path))


def bench_tokens_command(
    concepts: Optional[Path] = typer.Option(None, "--concepts", help="JSON list of {name, trigger, class_noun, lora, looks}; default: the demo repository."),
    count: int = typer.Option(4, "--count", help="How many of the concepts to analyze."),
    model: str = typer.Option("pq-nano", "--model", help="'pq-nano' or a diffusers Stable Diffusion folder."),
    bits: int = typer.Option(4, "--bits", help="Bits of the one token's K/V rows (2..8)."),
    seeds: int = typer.Option(2, "--seeds", help="Seeds per concept."),
    steps: int = typer.Option(10, "--steps", help="Denoising steps per image."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for tokens.csv, summary.md, mse.png, drift.png."),
    judge: Optional[Path] = typer.Option(None, "--judge", help="Judge folder (default: the shipped PQ-Nano judge)."),
    threads: int = typer.Option(1, "--threads", help="torch CPU threads."),
):
    """Per-token sensitivity at BITS over personal checkpoints: trigger span vs other tokens, MSE and judge drift."""
    import torch

    from personalq.config import personalq_home
    from personalq.eval.token_sensitivity_bench import token_sensitivity
    from personalq.taq.analyze import write_report

    torch.set_num_threads(threads)
    if not 2 <= bits <= 8:
        _fail(f"--bits {bits}: choose 2..8")
    if seeds < 1 or count < 1:
        _fail("--seeds and --count need at least 1")
    concept_list = _concepts(concepts, count)
    scorer_judge = _load_judge(judge)
    pipe, guidance = _load_model(model)
    records = token_sensitivity(pipe, concept_list, scorer_judge, bits=bits, seeds=range(seeds), steps=steps, guidance=guidance)
    out = out or personalq_home() / "bench" / "tokens"
    paths = write_report(records, out, bits)
    typer.echo(paths[1].read_text())
    for path in paths:
        typer.echo(str(path))


def bench_e2e_command(
    repo: Optional[Path] = typer.Option(None, "--repo", help="Built demo repository folder (default: assets/demo_repo)."),
    count: int = typer.Option(6, "--count", help="Concepts to write requests for (two requests each)."),
    settings: str = typer.Option("FP32,W8A8,W8A4,W4A4", "--settings", help="Comma-separated settings."),
    seeds: int = typer.Option(1, "--seeds", help="Seeds per request."),
    steps: int = typer.Option(20, "--steps", help="Denoising steps."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for the store copy, quantized UNets, e2e.json and e2e.md."),
    judge: Optional[Path] = typer.Option(None, "--judge", help="Judge folder (default: the shipped PQ-Nano judge)."),
    threads: int = typer.Option(1, "--threads", help="torch CPU threads."),
):
    """Request -> Check-in (or random) -> rewrite -> served image at each setting, plain PTQ vs TAQ; success by the judge."""
    import json
    import time

    import torch

    from personalq.config import personalq_home
    from personalq.eval.e2e_bench import demo_requests, e2e_table, run_e2e, select_all
    from personalq.eval.quality_bench import DEMO_CONCEPTS, JudgeScorer, load_concepts
    from personalq.nano import DEFAULT_GUIDANCE
    from personalq.serving import PipelineManager, ServingConfig
    from personalq.serving.requests import ServingError
    from personalq.setting import get_setting
    from personalq.store import RepoStore

    torch.set_num_threads(threads)
    repo = repo or DEMO_CONCEPTS
    names = [s.strip().upper() for s in settings.split(",") if s.strip()]
    try:
        for name in names:
            get_setting(name)
        concepts = {c.name: c for c in load_concepts(repo)}
    except (ValueError, ServingError) as error:
        _fail(str(error))
    if seeds < 1 or steps < 1 or count < 1:
        _fail("--seeds, --steps and --count need at least 1")
    scorer = JudgeScorer(_load_judge(judge))
    out = out or personalq_home() / "bench" / "e2e"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    store = RepoStore.open(out / "store")
    known = {card.id for card in store.cards()}
    if not set(concepts) <= known:
        store.import_dir(repo)
    requests = [r for r in demo_requests(repo, count) if (r["ground_truth"]["checkpoint_id"] or r["ground_truth"]["final_checkpoint_id"]) in concepts]
    selections = select_all(store, requests)
    rows = run_e2e(lambda: PipelineManager(ServingConfig(base_model="pq-nano", quantized_dir=out / "quantized"), store=store), scorer, selections, concepts, names, seeds=range(seeds), steps=steps, guidance=DEFAULT_GUIDANCE,
                   log=lambda line: typer.echo(line, err=True))
    (out / "e2e.json").write_text(json.dumps(rows, indent=1))
    table = e2e_table(rows)
    (out / "e2e.md").write_text(table + "\n")
    typer.echo(f"{len(requests)} requests over {len(concepts)} built checkpoints, {steps} steps, {seeds} seed(s), "
               f"{torch.get_num_threads()} CPU thread(s), {time.perf_counter() - t0:.0f} s")
    typer.echo(table)


def bench_layers_command(
    setting: str = typer.Option("W8A4", "--setting", help="The quantized setting to take apart (activations at 8 bits or fewer)."),
    count: int = typer.Option(2, "--count", help="How many concepts (the first demo checkpoints)."),
    seeds: int = typer.Option(2, "--seeds", help="Seeds per prompt."),
    steps: int = typer.Option(20, "--steps", help="Denoising (and calibration) steps."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for report.md, results.json, images.npz, grid.png."),
    concepts: Optional[Path] = typer.Option(None, "--concepts", help="JSON list of {name, trigger, class_noun, lora, looks}; default: the demo repository."),
    judge: Optional[Path] = typer.Option(None, "--judge", help="Judge folder (default: the shipped PQ-Nano judge)."),
    model: str = typer.Option("pq-nano", "--model", help="'pq-nano' or a diffusers Stable Diffusion folder."),
    threads: int = typer.Option(1, "--threads", help="torch CPU threads."),
):
    """Which activation quantizers cost the concept at SETTING (one group at a time), and static <sks> vs world-prompt vs dynamic ranges."""
    import time

    import torch

    from personalq.config import personalq_home
    from personalq.eval.layer_sensitivity_bench import LayerBench, bench_size, report, write_report
    from personalq.eval.quality_bench import JudgeScorer
    from personalq.taq.config import QuantConfig

    torch.set_num_threads(threads)
    try:
        config = QuantConfig.from_setting(setting)
    except ValueError as error:
        _fail(str(error))
    if not config.quantizes_activations:
        _fail(f"--setting {setting}: choose a setting that quantizes activations (W8A8, W4A8, W8A4, W4A4)")
    if seeds < 1 or steps < 1 or count < 1:
        _fail("--seeds, --steps and --count need at least 1")
    concept_list = _concepts(concepts, count)
    scorer = JudgeScorer(_load_judge(judge))
    pipe, guidance = _load_model(model)
    t0 = time.perf_counter()
    bench = LayerBench(pipe, concept_list, scorer, config.name, bench_size(len(concept_list), seeds, steps, config.name), guidance,
                       log=lambda line: typer.echo(line, err=True))
    result = bench.run()
    paths = write_report(result, out or personalq_home() / "bench" / f"layers-{config.name.lower()}")
    typer.echo(f"{model}: {config.name}, {len(concept_list)} concepts, {len(bench.prompts)} images per row, {steps} steps, "
               f"{torch.get_num_threads()} CPU thread(s), {time.perf_counter() - t0:.0f} s")
    typer.echo(report(result))
    for path in paths:
        typer.echo(str(path))


def bench_quant_command(
    base: str = typer.Option("pq-nano", help="pq-nano (shipped) or sd15-shape (random-weight SD 1.5-shaped UNet, 860M)."),
    device: str = typer.Option("cpu", help="cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object."),
    workdir: Optional[Path] = typer.Option(None, help="Where the base and its quantized variants are saved (default: $PERSONALQ_HOME/bench/quant/BASE)."),
    kernels: bool = typer.Option(False, "--kernels", help="Instead: one SD 1.5-sized Linear and Conv2d product per CPU kernel, in ms."),
) -> None:
    """Every bit-width setting side by side in one process: resident bytes, UNet bytes, load, step and image time."""
    import json
    import sys

    from personalq.eval.quant_bench import BASES, bench_quant, kernel_times, quant_table

    if kernels:
        times = kernel_times()
        typer.echo(json.dumps(times) if as_json else "\n".join(f"{name}: {ms:.2f} ms" for name, ms in times.items()))
        return

    if base not in BASES:
        _fail(f"--base {base}: choose one of {', '.join(BASES)}")
    if device not in ("cpu", "cuda"):
        _fail(f"--device {device}: choose cpu or cuda")
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        _fail("--device cuda: no CUDA device here")
    result = bench_quant(base, device, workdir, log=lambda line: print(line, file=sys.stderr))
    typer.echo(json.dumps(result) if as_json else quant_table(result))


def bench_store_command(
    sizes: Annotated[str, typer.Option(help="Comma-separated catalog sizes.")] = "1000,10000",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")] = False,
) -> None:
    """Time load-catalog, reopen, cards() and reindex on synthetic catalogs."""
    from personalq.eval.store_bench import run_store_bench

    try:
        counts = [int(part) for part in sizes.split(",") if part.strip()]
    except ValueError:
        _fail(f"--sizes: expected comma-separated integers, got {sizes!r}", code=1)
    run_store_bench(counts, as_json=as_json)


def bench_taq_command(
    settings: Annotated[str, typer.Option(help="Comma-separated settings.")] = "FP32,FP16,W8A8,W4A8,W8A4,W4A4",
    calls: Annotated[int, typer.Option(help="Timed UNet calls per setting (median reported).")] = 1,
    calibration_steps: Annotated[int, typer.Option(help="Calibration steps (one prompt, both CFG halves) per setting.")] = 1,
    threads: Annotated[int, typer.Option(help="torch CPU threads (0 = torch's default).")] = 0,
):
    """SD 1.5 UNet (real config, random weights), CPU, 64x64 latents: bytes, BOPs, seconds per call."""
    import torch

    from personalq.eval.taq_bench import benchmark_settings, markdown_table
    from personalq.taq.config import SETTINGS

    names = [s.strip().upper() for s in settings.split(",") if s.strip()]
    unknown = [s for s in names if s not in SETTINGS]
    if unknown:
        _fail(f"unknown setting(s) {', '.join(unknown)}: choose from {', '.join(SETTINGS)}")
    if threads > 0:
        torch.set_num_threads(threads)
    typer.echo(f"SD 1.5 UNet (random weights), batch 1, 64x64 latents, {torch.get_num_threads()} CPU threads, torch {torch.__version__}")
    benchmark_settings(names, calls=calls, calibration_steps=calibration_steps, on_row=lambda rows: typer.echo(markdown_table(rows) + "\n"))


def bench_serve_command(
    requests: Annotated[int, typer.Option(help="Requests to replay.")] = 200,
    checkpoints: Annotated[int, typer.Option(help="LoRA checkpoints in the repository.")] = 20,
    zipf: Annotated[float, typer.Option(help="Zipf exponent of checkpoint popularity.")] = 1.1,
    setting: Annotated[str, typer.Option(help="Bit-width setting of every request, or several (FP32,W8A8,W4A8) that requests take in turn.")] = "W8A8",
    model: Annotated[str, typer.Option(help="sd15-random (SD 1.5 UNet, random weights), pq-nano, or any base model.")] = "pq-nano",
    steps: Annotated[int, typer.Option(help="Denoising steps per request.")] = 20,
    size: Annotated[Optional[int], typer.Option(help="Image height and width (default: the model's).")] = None,
    memory_budget: Annotated[Optional[float], typer.Option(help="Cache budget in MiB (default: unbounded).")] = None,
    device: Annotated[Optional[str], typer.Option(help="cuda, cpu, ...")] = None,
    naive: Annotated[bool, typer.Option("--naive/--no-naive", help="Also run the naive load-from-disk server.")] = True,
    seed: Annotated[int, typer.Option()] = 0,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Also write the figures as JSON here.")] = None,
    repo: Annotated[Optional[Path], typer.Option(help="Folder of built LoRA checkpoints for this model, e.g. assets/demo_repo (default: random-weight LoRAs).")] = None,
) -> None:
    """Replay a Zipf workload of LoRA requests: throughput, latency, switch time, peak resident bytes."""
    import json

    from personalq.eval.serve_bench import bench_serve, figures_json, figures_table
    from personalq.serving import ServingError

    budget = None if memory_budget is None else int(memory_budget * 2**20)
    try:
        results = bench_serve(model, requests, checkpoints, zipf, setting, steps, budget, size, device, seed, naive,
                              repo=repo, log=lambda line: typer.echo(line, err=True))
    except (ServingError, ValueError) as error:
        _fail(str(error), code=1)
    typer.echo(figures_table(results))
    if budget is not None:
        typer.echo(f"memory budget: {memory_budget:.1f} MiB; PersonalQ peak resident {results[0].peak_resident_bytes / 2**20:.1f} MiB")
    if json_out is not None:
        json_out.write_text(json.dumps(figures_json(results), indent=1))


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    bench_app.command("quant")(bench_quant_command)
    bench_app.command("quality")(bench_quality_command)
    bench_app.command("tokens")(bench_tokens_command)
    bench_app.command("e2e")(bench_e2e_command)
    bench_app.command("layers")(bench_layers_command)
    bench_app.command("store")(bench_store_command)
    bench_app.command("taq")(bench_taq_command)
    bench_app.command("serve")(bench_serve_command)
