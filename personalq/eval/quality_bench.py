"""`personalq bench quality`: does a quantized UNet still draw the personalized concept?

Every cell of the benchmark is one (bit-width setting, protection method, attention-probability
quantizer). A cell quantizes a pristine copy of the base UNet through TAQ exactly as serving does
(calibrated once on the default calibration prompts, personal LoRAs attached afterwards), then
renders, from fixed seeds:

- for each concept, held-out prompts that contain its trigger (scene/time/style/action values that
  no calibration prompt uses), scored by the judge for the concept's looks (trigger fidelity);
- plain world captions with the LoRAs switched off, scored by the judge for the attributes the
  caption names (alignment) and by FD-EffNet against the world's true renders of those captions.

Serving only knows "protect the trigger or nothing", so the benchmark drives `personalq.taq`
directly in serving's order; that is what lets it also measure start-token protection and the
logarithmic quantizer. Cells are cached one file each, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from personalq.config import ASSETS_DIR

FP_SETTINGS = ("FP32", "FP16")
METHODS = {"plain PTQ": "none", "start token": "bos", "TAQ": "trigger", "TAQ + start token": "trigger+bos"}
"""Row name -> TAQ `protect` mode, in the order of the paper's table."""
DEMO_CONCEPTS = ASSETS_DIR / "demo_repo"
CALIBRATION_TRIGGER = "<sks>"
"""Serving calibrates every base UNet on the default prompts around this placeholder trigger."""


@dataclass(frozen=True)
class Concept:
    """A personalized checkpoint under test: its LoRA file, trigger, and the looks its trigger should bring."""

    name: str
    trigger: str
    class_noun: str
    lora_path: str
    looks: tuple[tuple[str, str], ...]

    @property
    def looks_dict(self) -> dict[str, str]:
        return dict(self.looks)


@dataclass(frozen=True)
class BenchSize:
    concepts: int
    trigger_prompts: int
    world_captions: int
    seeds: int
    steps: int
    calibration_prompts: int
    settings: tuple[str, ...]
    ablation_setting: str


QUICK = BenchSize(concepts=2, trigger_prompts=1, world_captions=2, seeds=2, steps=10, calibration_prompts=4,
                  settings=("FP32", "W8A8", "W4A4"), ablation_setting="W4A4")
DEFAULT = BenchSize(concepts=4, trigger_prompts=2, world_captions=8, seeds=3, steps=20, calibration_prompts=16,
                    settings=("FP32", "W8A8", "W4A8", "W8A4", "W4A4"), ablation_setting="W8A4")


@dataclass(frozen=True)
class Cell:
    setting: str
    method: str  # a METHODS key; "full precision" for float settings
    quantizer: str = "linear"

    @property
    def key(self) -> str:
        return f"{self.setting}-{METHODS.get(self.method, 'fp')}-{self.quantizer}".replace("+", "_")

    @property
    def quantized(self) -> bool:
        return self.setting not in FP_SETTINGS


@dataclass(frozen=True)
class BenchPrompt:
    text: str
    seed: int
    concept: str | None  # None: a plain world caption, LoRAs off
    attrs: dict | None = None  # the caption's true world attributes (plain captions)
    named: tuple[str, ...] = ()


def cells_for(size: BenchSize) -> list[Cell]:
    """Full precision, every method at every quantized setting, then the log-quantizer ablation."""
    cells = []
    for setting in size.settings:
        if setting in FP_SETTINGS:
            cells.append(Cell(setting, "full precision"))
        else:
            cells.extend(Cell(setting, method) for method in METHODS)
    cells.extend(Cell(size.ablation_setting, method, "log") for method in METHODS)
    return cells


def load_concepts(path: str | Path) -> list[Concept]:
    """Concepts from a built demo repository folder, or from a JSON list of {name, trigger, class_noun,
    lora, looks} (relative LoRA paths are beside the file)."""
    path = Path(path)
    if path.is_dir():
        return demo_repo_concepts(path)
    if not path.is_file():
        raise ValueError(f"concept file {path} does not exist")
    try:
        entries = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"concept file {path} is not JSON: {error}") from None
    concepts = []
    for entry in entries:
        missing = {"name", "trigger", "class_noun", "lora", "looks"} - set(entry)
        if missing:
            raise ValueError(f"concept {entry.get('name', '?')} in {path} lacks {', '.join(sorted(missing))}")
        lora = Path(entry["lora"]) if Path(entry["lora"]).is_absolute() else path.parent / entry["lora"]
        if not lora.is_file():
            raise ValueError(f"concept {entry['name']}: LoRA file {lora} does not exist")
        concepts.append(Concept(entry["name"], entry["trigger"], entry["class_noun"], str(lora), tuple(sorted(entry["looks"].items()))))
    if not concepts:
        raise ValueError(f"concept file {path} lists no concepts")
    return concepts


def demo_repo_concepts(directory: str | Path, log: Callable[[str], None] = print) -> list[Concept]:
    """The built checkpoints of a demo repository with the looks their concept spec gives them;
    first versions of every category first, so that taking the first n spreads over categories.

    A checkpoint whose sidecar disagrees with today's spec (style or places) was built from an
    older spec, so its looks are unknown: it is left out with a one-line reason, never scored.
    """
    import yaml

    from personalq.demo.concepts import demo_concepts

    directory = Path(directory)
    built = []
    for c in demo_concepts():
        sidecar, lora = directory / f"{c.id}.yaml", directory / f"{c.id}.safetensors"
        if not (sidecar.is_file() and lora.is_file()):
            continue
        meta = yaml.safe_load(sidecar.read_text()) or {}
        if meta.get("style_tags", [None])[0] != c.style or list(meta.get("environment", [])) != list(c.scenes):
            log(f"{c.id}: left out, built from another concept spec ({meta.get('style_tags')}, {meta.get('environment')})")
            continue
        built.append(c)
    if not built:
        raise ValueError(f"{directory} holds no built demo checkpoint (id.safetensors + id.yaml) of the current concept spec")
    built.sort(key=lambda c: c.version)  # stable: category order is kept within a version
    return [Concept(c.id, c.trigger, c.category, str(directory / f"{c.id}.safetensors"), tuple(sorted(c.looks.items()))) for c in built]


def world_trigger_prompts(n: int, seed: int, trigger: str) -> list[str]:
    """Prompts in the words PQ-Nano was trained on: a style, the trigger, a place; the looks are never
    named. Sketches are left out: they are grey, so no judge could find a concept's colour in them."""
    from personalq.demo.concepts import SCENE_PHRASES
    from personalq.nano.world import COLOUR_STYLES

    rng = np.random.default_rng([seed, 4049])
    return [f"a {rng.choice(COLOUR_STYLES)} {trigger} {SCENE_PHRASES[str(rng.choice(sorted(SCENE_PHRASES)))]}" for _ in range(n)]


def bench_prompts(concepts: Sequence[Concept], size: BenchSize, prompts_file: str | Path | None = None) -> list[BenchPrompt]:
    """Per concept, trigger prompts alternating world words and the held-out calibration pools (or the
    templates of `prompts_file`, one per line with {trigger} and {class_noun}), plus held-out world
    captions; each repeated over `size.seeds` seeds."""
    from personalq.eval.alignment import held_out_cases
    from personalq.taq.prompts import held_out_prompts

    templates = None
    if prompts_file is not None:
        templates = [line.strip() for line in Path(prompts_file).read_text().splitlines() if line.strip()]
        bad = [t for t in templates if "{trigger}" not in t]
        if not templates or bad:
            raise ValueError(f"{prompts_file}: every line must hold {{trigger}}" + (f" (not: {bad[0]!r})" if bad else ""))
    prompts = []
    for i, concept in enumerate(concepts):
        if templates:
            texts = [t.format(trigger=concept.trigger, class_noun=concept.class_noun) for t in templates[: size.trigger_prompts]]
        else:
            world = world_trigger_prompts(size.trigger_prompts, seed=i, trigger=concept.trigger)
            pools = held_out_prompts(size.trigger_prompts, seed=i, trigger=concept.trigger, class_noun=concept.class_noun)
            texts = [(world if k % 2 == 0 else pools)[k] for k in range(size.trigger_prompts)]
        prompts += [BenchPrompt(text, seed, concept.name) for text in texts for seed in range(size.seeds)]
    for case in held_out_cases(size.world_captions):
        prompts += [BenchPrompt(case.caption.text, seed, None, case.attrs.as_dict(), case.caption.named) for seed in range(size.seeds)]
    return prompts


# ---- scoring -------------------------------------------------------------------------------------


class JudgeScorer:
    """Reads images with the PQ-Nano judge: which concept looks appear, which caption attributes appear."""

    def __init__(self, judge):
        self.judge = judge

    def looks_found(self, images, looks: dict[str, str]) -> list[bool]:
        """An image shows the concept when the judge reads every one of its looks off it."""
        return [all(pred[k] == v for k, v in looks.items()) for pred in self.judge.predict(images)]

    def alignment(self, images, named: Sequence[tuple[str, ...]], attrs: Sequence[dict]) -> list[float]:
        """Per image, the fraction of the caption's named attributes the judge finds."""
        preds = self.judge.predict(images)
        return [float(np.mean([p[k] == a[k] for k in n])) for p, n, a in zip(preds, named, attrs)]


def frechet_distance_few(images_a, images_b, features) -> float:
    """FD-EffNet computed exactly through the n x n Gram matrix: for n images and d = 1280 features,
    Tr((S_a S_b)^1/2) is the nuclear norm of X_a X_b^T / (n - 1), so no d x d matrix square root
    (tens of seconds on one CPU core, for each cell) is needed when n << d."""
    a, b = features(images_a), features(images_b)
    xa, xb = a - a.mean(0), b - b.mean(0)
    na, nb = len(a) - 1, len(b) - 1
    cross = np.linalg.svd(xa @ xb.T, compute_uv=False).sum() / math.sqrt(na * nb)
    return float(((a.mean(0) - b.mean(0)) ** 2).sum() + (xa**2).sum() / na + (xb**2).sum() / nb - 2 * cross)


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval (0 for a single value)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float(values.mean()) if len(values) else math.nan, 0.0
    sem = stats.sem(values)
    return float(values.mean()), float(sem * stats.t.ppf(0.975, len(values) - 1)) if sem > 0 else 0.0


# ---- running -------------------------------------------------------------------------------------


@dataclass
class BenchRun:
    """What one run is: the base pipeline, concepts, prompts, scorer and where cells are cached."""

    pipe: object
    concepts: list[Concept]
    prompts: list[BenchPrompt]
    scorer: JudgeScorer
    size: BenchSize
    out_dir: Path
    guidance: float = 4.0
    model_id: str = ""
    log: Callable[[str], None] = print
    _renders: list | None = field(default=None, repr=False)

    @property
    def fingerprint(self) -> str:
        """Cells computed under another model, size, concept set or prompt list are not reused."""
        blob = json.dumps([self.model_id, asdict(self.size), [asdict(c) for c in self.concepts],
                           [asdict(p) for p in self.prompts], self.guidance], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def cell_path(self, cell: Cell) -> Path:
        return self.out_dir / "cells" / f"{cell.key}.json"

    def cached(self, cell: Cell) -> dict | None:
        path = self.cell_path(cell)
        if path.exists():
            row = json.loads(path.read_text())
            if row.get("fingerprint") == self.fingerprint:
                return row
        return None

    def run(self, cells: Sequence[Cell]) -> list[dict]:
        rows = []
        for n, cell in enumerate(cells, 1):
            row = self.cached(cell)
            if row is None:
                started = time.perf_counter()
                row = self.measure(cell)
                self.log(f"[{n}/{len(cells)}] {cell.setting} {cell.method} ({cell.quantizer}): "
                         f"fidelity {row['trigger_fidelity']:.3f}, alignment {row['alignment']:.3f}, "
                         f"FD-EffNet {row['fd_effnet']:.1f}, {time.perf_counter() - started:.0f} s")
            else:
                self.log(f"[{n}/{len(cells)}] {cell.setting} {cell.method} ({cell.quantizer}): cached")
            rows.append(row)
        return rows

    def _cell_pipe(self, cell: Cell):
        """The base pipeline with a fresh copy of the UNet, quantized for `cell` as serving would."""
        import torch

        from personalq.taq import QuantConfig, calibration_prompts, quantize

        if cell.setting == "FP16":
            return copy.deepcopy(self.pipe).to(dtype=torch.float16)
        pipe = copy.copy(self.pipe)  # shares text encoder, VAE and tokenizer; only the UNet is replaced
        pipe.register_modules(unet=copy.deepcopy(self.pipe.unet))
        if cell.quantized:
            config = QuantConfig.from_setting(cell.setting, protect=METHODS[cell.method], quantizer=cell.quantizer)
            prompts = calibration_prompts(n=self.size.calibration_prompts, trigger=CALIBRATION_TRIGGER)
            quantize(pipe, config, calibration_prompts=prompts, num_inference_steps=self.size.steps)
        return pipe

    def measure(self, cell: Cell) -> dict:
        from PIL import Image

        from personalq.eval.fd_effnet import effnet_features
        from personalq.personalize import attach_personalized_lora
        from personalq.taq import resident_weight_bytes, unet_bops

        started = time.perf_counter()
        pipe = self._cell_pipe(cell)
        quantize_seconds = time.perf_counter() - started
        unet_bytes = resident_weight_bytes(pipe.unet)
        bops = unet_bops(pipe.unet)
        for concept in self.concepts:
            attach_personalized_lora(pipe, concept.lora_path, adapter_name=_adapter(concept))
        protect = METHODS.get(cell.method, "none")
        images, generate_seconds = render_prompts(pipe, self.concepts, self.prompts, self.size.steps, self.guidance, protect, cell.quantized)
        fidelity = []
        for concept in self.concepts:
            idx = [i for i, p in enumerate(self.prompts) if p.concept == concept.name]
            fidelity += self.scorer.looks_found([images[i] for i in idx], concept.looks_dict)
        plain = [i for i, p in enumerate(self.prompts) if p.concept is None]
        alignment = self.scorer.alignment([images[i] for i in plain], [self.prompts[i].named for i in plain],
                                          [self.prompts[i].attrs for i in plain])
        fd = frechet_distance_few([images[i] for i in plain], self.reference_renders(), effnet_features) if len(plain) > 1 else math.nan
        arrays = np.stack([np.asarray(im.convert("RGB")) for im in images])
        self.cell_path(cell).parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(self.cell_path(cell).with_suffix(".npz"), images=arrays)
        fid_mean, fid_ci = mean_ci95([float(f) for f in fidelity])
        ali_mean, ali_ci = mean_ci95(alignment)
        row = {
            "fingerprint": self.fingerprint,
            **asdict(cell),
            "trigger_fidelity": fid_mean,
            "trigger_fidelity_ci95": fid_ci,
            "alignment": ali_mean,
            "alignment_ci95": ali_ci,
            "fd_effnet": fd,
            "unet_bytes": unet_bytes,
            "bops": bops,
            "seconds_per_image": generate_seconds / len(images),
            "quantize_seconds": quantize_seconds,
            "images": len(images),
            "fidelity_hits": [bool(f) for f in fidelity],
        }
        self.cell_path(cell).write_text(json.dumps(row, indent=1))
        Image.fromarray(arrays[0]).save(self.cell_path(cell).with_suffix(".png"))
        return row

    def reference_renders(self) -> list:
        """The world's true renders of the plain captions (one per caption and seed), FD-EffNet's reference."""
        if self._renders is None:
            from personalq.nano.world import WorldAttributes, render

            plain = [p for p in self.prompts if p.concept is None]
            self._renders = [render(WorldAttributes(**p.attrs), seed=10_000 + n) for n, p in enumerate(plain)]
        return self._renders


def _adapter(concept: Concept) -> str:
    return "c_" + hashlib.sha1(concept.name.encode()).hexdigest()[:10]


def render_prompts(pipe, concepts: Sequence[Concept], prompts: Sequence[BenchPrompt], steps: int, guidance: float,
                   protect: str, quantized: bool) -> tuple[list, float]:
    """PIL images of `prompts` in order, and the seconds spent generating them: each concept's prompts
    batched with its LoRA active, plain captions with LoRAs off, every image from its seed's latents,
    and on a quantized UNet the protection of each batch's trigger spans passed per call."""
    import torch

    from personalq.taq import protection_kwargs

    by_name = {c.name: c for c in concepts}
    groups: dict[str | None, list[int]] = {}
    for i, prompt in enumerate(prompts):
        groups.setdefault(prompt.concept, []).append(i)
    images: list = [None] * len(prompts)
    seconds = 0.0
    for concept_name, indices in groups.items():
        if concept_name is None:
            pipe.disable_lora()
            triggers: list[str] = []
        else:
            pipe.enable_lora()
            pipe.set_adapters(_adapter(by_name[concept_name]))
            triggers = [by_name[concept_name].trigger]
        texts = [prompts[i].text for i in indices]
        kwargs = protection_kwargs(pipe, texts, triggers, protect=protect) if quantized else {}
        latents = torch.stack([_latent(pipe, prompts[i].seed) for i in indices])
        started = time.perf_counter()
        with torch.no_grad():
            out = pipe(texts, num_inference_steps=steps, guidance_scale=guidance, latents=latents.to(pipe.unet.dtype),
                       cross_attention_kwargs=kwargs or None)
        seconds += time.perf_counter() - started
        for i, image in zip(indices, out.images):
            images[i] = image
    return images, seconds


def _latent(pipe, seed: int):
    import torch

    config = pipe.unet.config
    generator = torch.Generator("cpu").manual_seed(seed)
    return torch.randn(config.in_channels, config.sample_size, config.sample_size, generator=generator)


# ---- reporting -----------------------------------------------------------------------------------


def _pct(row: dict, key: str) -> str:
    return f"{100 * row[key]:.1f} ± {100 * row[key + '_ci95']:.1f}"


def main_table(rows: list[dict]) -> str:
    """The paper's layout: methods as rows, bit-widths as column groups (fidelity / alignment / FD-EffNet)."""
    linear = [r for r in rows if r["quantizer"] == "linear"]
    settings = list(dict.fromkeys(r["setting"] for r in linear))
    methods = list(dict.fromkeys(r["method"] for r in linear))
    by = {(r["setting"], r["method"]): r for r in linear}
    head = "| method | " + " | ".join(f"{s} fidelity % | {s} alignment % | {s} FD-EffNet" for s in settings) + " |"
    lines = [head, "|---|" + "---:|" * (3 * len(settings))]
    for method in methods:
        cells = []
        for s in settings:
            row = by.get((s, method))
            cells += [_pct(row, "trigger_fidelity"), _pct(row, "alignment"), f"{row['fd_effnet']:.1f}"] if row else ["–"] * 3
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cost_table(rows: list[dict]) -> str:
    """Resident UNet bytes, BOPs per UNet call and seconds per image of each linear-quantizer cell."""
    lines = ["| setting | method | UNet MiB | GBOPs / UNet call | s / image | quantize + calibrate s |", "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        if r["quantizer"] == "linear":
            lines.append(f"| {r['setting']} | {r['method']} | {r['unet_bytes'] / 2**20:.2f} | {r['bops'] / 1e9:.1f} "
                         f"| {r['seconds_per_image']:.2f} | {r['quantize_seconds']:.1f} |")
    return "\n".join(lines)


def ablation_table(rows: list[dict], setting: str) -> str:
    """Quantizer x protection at one setting (the paper's Table 4)."""
    lines = [f"| {setting}: quantizer | protection | fidelity % | alignment % | FD-EffNet |", "|---|---|---:|---:|---:|"]
    for r in rows:
        if r["setting"] == setting:
            lines.append(f"| {r['quantizer']} | {r['method']} | {_pct(r, 'trigger_fidelity')} | {_pct(r, 'alignment')} | {r['fd_effnet']:.1f} |")
    return "\n".join(lines)


def drift_table(run: BenchRun, rows: list[dict]) -> str:
    """Mean absolute pixel change (0-255) from the full-precision image of the same prompt and seed:
    a paired, continuous view of what the judge's yes/no fidelity can hide at small sample sizes."""
    fp = next((r for r in rows if r["setting"] in FP_SETTINGS), None)
    if fp is None:
        return "(no full-precision cell to compare with)"
    load = lambda row: np.load(run.cell_path(Cell(row["setting"], row["method"], row["quantizer"])).with_suffix(".npz"))["images"].astype(float)  # noqa: E731
    reference = load(fp)
    trigger = np.array([p.concept is not None for p in run.prompts])
    lines = ["| setting | method | quantizer | trigger images | plain captions |", "|---|---|---|---:|---:|"]
    for r in rows:
        if r is not fp:
            change = np.abs(load(r) - reference).mean(axis=(1, 2, 3))
            lines.append(f"| {r['setting']} | {r['method']} | {r['quantizer']} | {change[trigger].mean():.1f} | {change[~trigger].mean():.1f} |")
    return "\n".join(lines)


def image_grid(run: BenchRun, rows: list[dict], path: Path) -> Path:
    """Rows: methods; columns: settings; the first trigger prompt's first seed in every cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    linear = [r for r in rows if r["quantizer"] == "linear"]
    settings = list(dict.fromkeys(r["setting"] for r in linear))
    methods = list(METHODS)
    fig, axes = plt.subplots(len(methods), len(settings), figsize=(1.6 * len(settings) + 0.8, 1.6 * len(methods) + 0.6), squeeze=False)
    for i, method in enumerate(methods):
        for j, setting in enumerate(settings):
            ax = axes[i][j]
            ax.set_xticks([])
            ax.set_yticks([])
            cell = Cell(setting, "full precision" if setting in FP_SETTINGS else method)
            png = run.cell_path(cell).with_suffix(".png")
            if png.exists():
                ax.imshow(Image.open(png))
            if i == 0:
                ax.set_title(setting, fontsize=9)
            if j == 0:
                ax.set_ylabel(method, fontsize=8)
    fig.suptitle(f"{run.prompts[0].text[:70]} (seed {run.prompts[0].seed})", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(run: BenchRun, rows: list[dict]) -> list[Path]:
    out = run.out_dir
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    text = "\n\n".join([
        "## Trigger fidelity, alignment and FD-EffNet (means ± 95% interval)", main_table(rows),
        "## Change from the full-precision image (mean |pixel difference|, 0-255, same prompt and seed)", drift_table(run, rows),
        "## Cost", cost_table(rows),
        f"## Ablation: attention-probability quantizer x protection at {run.size.ablation_setting}",
        ablation_table(rows, run.size.ablation_setting),
    ])
    (out / "report.md").write_text(text + "\n")
    return [out / "results.json", out / "report.md", image_grid(run, rows, out / "grid.png")]
