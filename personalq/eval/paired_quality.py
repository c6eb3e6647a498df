"""`personalq bench quality --per-image`: the powered, paired trigger-fidelity benchmark (issue 24).

Every method renders the same images: checkpoints x trigger prompts x seeds from the demo repository,
each from its seed's fixed latents. Per image it records whether the judge reads the checkpoint's looks
(`judge_success`) and the mean absolute pixel difference (0-255) from the full-precision image of the
same (checkpoint, prompt, seed) (`dist_to_fp`). Pairing is what lets `paired_stats` test small
differences: only the images where two methods disagree carry evidence.

Work is checkpointed per (setting, method, checkpoint) chunk under the run folder, so a killed run
resumes where it stopped; `export_csv` then writes one CSV per setting under docs/results/quality/.
The LoRA branch stays in full precision in every quantized setting; its bytes are recorded per run.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from personalq.eval.quality_bench import Concept, JudgeScorer, _adapter, _latent

FP_SETTING = "FP32"
FP_METHOD = "full precision"
CSV_COLUMNS = ("setting", "method", "checkpoint", "prompt", "seed", "judge_success", "dist_to_fp")


@dataclass(frozen=True)
class Method:
    """A row of the tables: a name and the QuantConfig fields it sets (protection, calibration)."""

    name: str
    config: tuple[tuple[str, object], ...]

    @property
    def options(self) -> dict:
        return dict(self.config)

    @property
    def slug(self) -> str:
        return "".join(ch if ch.isalnum() else "_" for ch in self.name.lower())

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.config, default=str).encode()).hexdigest()[:12]


METHODS = {m.name: m for m in (
    Method("plain PTQ", (("protect", "none"),)),
    Method("start token", (("protect", "bos"),)),  # MixDQ-style: the start token's pathway kept float
    Method("TAQ", (("protect", "trigger"),)),
    Method("TAQ + start token", (("protect", "trigger+bos"),)),
    Method("timestep-aware", (("protect", "none"), ("timestep_groups", 4))),  # TDQ / Q-Diffusion-style ranges
    Method("SmoothQuant", (("protect", "none"), ("smooth_alpha", 0.5))),
    Method("TAQ + timestep-aware", (("protect", "trigger"), ("timestep_groups", 4))),
    Method("TAQ + SmoothQuant", (("protect", "trigger"), ("smooth_alpha", 0.5))),
)}
"""The methods a run may name, by row name; every quantized one calibrates on the same prompts."""

BASELINE = "plain PTQ"
TAQ_METHODS = tuple(name for name in METHODS if name.startswith("TAQ"))


@dataclass(frozen=True)
class Item:
    """One paired image: the same checkpoint, prompt and seed under every method."""

    checkpoint: str
    prompt: str
    seed: int


@dataclass(frozen=True)
class Design:
    """How many images and how they are rendered; `checkpoints * prompts * seeds` images per cell."""

    checkpoints: int = 30
    prompts: int = 4
    seeds: int = 2
    steps: int = 12
    guidance: float = 4.0
    calibration_prompts: int = 16
    batch: int = 8

    @property
    def images(self) -> int:
        return self.checkpoints * self.prompts * self.seeds


def design_items(concepts: Sequence[Concept], design: Design) -> list[Item]:
    """Per checkpoint, trigger prompts alternating PQ-Nano's world words and the held-out pools (no value a
    calibration prompt uses), each at seeds 0..seeds-1."""
    from personalq.eval.quality_bench import world_trigger_prompts
    from personalq.taq.prompts import held_out_prompts

    items = []
    for i, concept in enumerate(concepts[: design.checkpoints]):
        world = world_trigger_prompts(design.prompts, seed=i, trigger=concept.trigger)
        pools = held_out_prompts(design.prompts, seed=i, trigger=concept.trigger, class_noun=concept.class_noun)
        texts = [(world if k % 2 == 0 else pools)[k] for k in range(design.prompts)]
        items += [Item(concept.name, text, seed) for text in texts for seed in range(design.seeds)]
    return items


def served_calibration_prompts(concepts: Sequence[Concept], n: int) -> list[str]:
    """Calibration prompts around the triggers actually served (round robin over the checkpoints), from the
    calibration pools, which share no scene/time/style/action value with the held-out test prompts."""
    from personalq.taq.prompts import calibration_prompts

    return [calibration_prompts(1, seed=k, trigger=concepts[k % len(concepts)].trigger,
                                class_noun=concepts[k % len(concepts)].class_noun)[0] for k in range(n)]


def pixel_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per image, the mean absolute difference of uint8 RGB pixels (0-255) between two [n, h, w, 3] stacks."""
    if a.shape != b.shape:
        raise ValueError(f"image stacks differ in shape: {a.shape} vs {b.shape}")
    return np.abs(a.astype(np.float32) - b.astype(np.float32)).mean(axis=(1, 2, 3))


@dataclass
class PairedRun:
    """The base pipeline, checkpoints, items and judge of one run, and its chunk folder."""

    pipe: object
    concepts: list[Concept]
    design: Design
    scorer: JudgeScorer
    out_dir: Path
    model_id: str = "pq-nano"
    log: Callable[[str], None] = print
    items: list[Item] = field(init=False)

    def __post_init__(self):
        self.concepts = list(self.concepts[: self.design.checkpoints])
        self.items = design_items(self.concepts, self.design)
        self.out_dir = Path(self.out_dir)

    @property
    def fingerprint(self) -> str:
        """Chunks computed for another model, design, checkpoint set or prompt list are not reused."""
        concepts = [(c.name, c.trigger, c.class_noun, c.looks) for c in self.concepts]  # not the path: a moved checkout resumes
        blob = json.dumps([self.model_id, asdict(self.design), concepts,
                           [asdict(i) for i in self.items]], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def chunk_path(self, setting: str, method: str, checkpoint: str) -> Path:
        slug = METHODS[method].slug if method in METHODS else "fp"
        return self.out_dir / self.fingerprint / setting / slug / f"{checkpoint}.json"

    def load_chunk(self, setting: str, method: str, checkpoint: str) -> list[dict] | None:
        path = self.chunk_path(setting, method, checkpoint)
        if not path.exists():
            return None
        chunk = json.loads(path.read_text())
        expected = METHODS[method].digest if method in METHODS else "fp"
        return chunk["rows"] if chunk.get("method_digest") == expected else None

    def cell_rows(self, setting: str, method: str) -> list[dict] | None:
        """Every row of a finished cell in item order, or None while any chunk is missing."""
        rows = []
        for concept in self.concepts:
            chunk = self.load_chunk(setting, method, concept.name)
            if chunk is None:
                return None
            rows += chunk
        return rows

    # ---- rendering ------------------------------------------------------------------------------

    def run(self, settings: Sequence[str], methods: Sequence[str]) -> None:
        """Full precision first (every distance needs it), then every (setting, method) cell, method by method
        (so that a run cut short has its first methods at every setting); finished chunks are skipped, so
        calling this again resumes."""
        from tqdm import tqdm

        cells = [(FP_SETTING, FP_METHOD)] + [(s, m) for m in methods for s in settings]
        self.add_trigger_tokens()
        todo = {cell: [c for c in self.concepts if self.load_chunk(*cell, c.name) is None] for cell in cells}
        per_checkpoint = self.design.prompts * self.design.seeds
        total = sum(len(v) for v in todo.values()) * per_checkpoint
        self.log(f"{len(cells)} cells x {self.design.images} images; {total} images still to render")
        with tqdm(total=total, unit="img", mininterval=20, smoothing=0.05) as bar:
            for cell, concepts in todo.items():
                concepts = self.missing(cell, concepts, bar, per_checkpoint)
                if not concepts:
                    continue
                bar.set_description(f"{cell[0]} {cell[1]}")
                started = time.perf_counter()
                pipe = self.cell_pipe(*cell)
                self.write_meta(*cell, pipe, time.perf_counter() - started)
                for concept in concepts:
                    if self.missing(cell, [concept], bar, per_checkpoint):
                        self.render_chunk(pipe, cell, concept)
                        bar.update(per_checkpoint)
                del pipe

    def missing(self, cell: tuple[str, str], concepts: Sequence[Concept], bar, per_checkpoint: int) -> list[Concept]:
        """The checkpoints of `cell` still without a chunk: another process on the same run folder (a second
        worker given the methods in another order) may have written some since this one started."""
        left = [c for c in concepts if self.load_chunk(*cell, c.name) is None]
        bar.update((len(concepts) - len(left)) * per_checkpoint)
        return left

    def add_trigger_tokens(self) -> None:
        """Every served trigger in the tokenizer before any calibration, so that calibration prompts see the
        trigger's own token even when the full-precision cell (which attaches the LoRAs) was done earlier."""
        from personalq.personalize.lora_file import read_trigger_embeddings

        vocab = self.pipe.tokenizer.get_vocab()
        fresh = {t: e for c in self.concepts for t, e in read_trigger_embeddings(c.lora_path).items() if t not in vocab}
        if fresh:
            self.pipe.load_textual_inversion(list(fresh.values()), token=list(fresh), tokenizer=self.pipe.tokenizer,
                                             text_encoder=self.pipe.text_encoder)

    def cell_pipe(self, setting: str, method: str):
        """The base pipeline with a fresh UNet: quantized for the cell (weights, then activation ranges
        calibrated on the served-trigger prompts with the LoRAs off), then every checkpoint's LoRA attached."""
        from personalq.personalize import attach_personalized_lora
        from personalq.taq import QuantConfig, quantize

        pipe = copy.copy(self.pipe)  # shares text encoder, VAE and tokenizer; only the UNet is replaced
        pipe.register_modules(unet=copy.deepcopy(self.pipe.unet))
        if setting != FP_SETTING:
            config = QuantConfig.from_setting(setting, **METHODS[method].options)
            prompts = served_calibration_prompts(self.concepts, self.design.calibration_prompts)
            quantize(pipe, config, calibration_prompts=prompts, triggers=[c.trigger for c in self.concepts],
                     num_inference_steps=self.design.steps)
        for concept in self.concepts:
            attach_personalized_lora(pipe, concept.lora_path, adapter_name=_adapter(concept))
        return pipe

    def write_meta(self, setting: str, method: str, pipe, seconds: float) -> None:
        """Per cell: bytes of the (quantized) base UNet and of the float LoRA branch, and set-up seconds."""
        from personalq.taq import resident_weight_bytes

        lora = sum(p.numel() * p.element_size() for n, p in pipe.unet.named_parameters() if ".lora_" in n)
        meta = {"setting": setting, "method": method, "unet_bytes": resident_weight_bytes(pipe.unet),
                "lora_float_bytes_all_adapters": lora, "lora_float_bytes_per_checkpoint": lora // len(self.concepts),
                "setup_seconds": round(seconds, 1), "design": asdict(self.design)}
        path = self.chunk_path(setting, method, "x").with_name("meta.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(meta, indent=1))

    def render_chunk(self, pipe, cell: tuple[str, str], concept: Concept) -> None:
        import torch

        from personalq.taq import protection_kwargs

        setting, method = cell
        items = [i for i in self.items if i.checkpoint == concept.name]
        pipe.enable_lora()
        pipe.set_adapters(_adapter(concept))
        protect = METHODS[method].options.get("protect", "none") if method in METHODS else "none"
        arrays = []
        for start in range(0, len(items), self.design.batch):
            batch = items[start : start + self.design.batch]
            texts = [i.prompt for i in batch]
            kwargs = protection_kwargs(pipe, texts, [concept.trigger], protect=protect) if setting != FP_SETTING else {}
            latents = torch.stack([_latent(pipe, i.seed) for i in batch]).to(pipe.unet.dtype)
            with torch.no_grad():
                out = pipe(texts, num_inference_steps=self.design.steps, guidance_scale=self.design.guidance,
                           latents=latents, cross_attention_kwargs=kwargs or None)
            arrays += [np.asarray(im.convert("RGB")) for im in out.images]
        images = np.stack(arrays)
        success = self.scorer.looks_found(_pil(images), concept.looks_dict)
        fp_npz = self.chunk_path(FP_SETTING, FP_METHOD, concept.name).with_suffix(".npz")
        if setting == FP_SETTING:
            fp_npz.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(fp_npz, images=images)
        distance = pixel_distance(images, np.load(fp_npz)["images"])
        rows = [{"setting": setting, "method": method, "checkpoint": i.checkpoint, "prompt": i.prompt, "seed": i.seed,
                 "judge_success": int(s), "dist_to_fp": round(float(d), 4)} for i, s, d in zip(items, success, distance)]
        path = self.chunk_path(setting, method, concept.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = METHODS[method].digest if method in METHODS else "fp"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"method_digest": digest, "rows": rows}))
        tmp.replace(path)

    # ---- export ---------------------------------------------------------------------------------

    def export_csv(self, settings: Sequence[str], methods: Sequence[str], directory: Path) -> list[Path]:
        """One CSV per setting (the FP reference in its own), holding every finished cell's rows."""
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for setting, cell_methods in [(FP_SETTING, [FP_METHOD])] + [(s, list(methods)) for s in settings]:
            rows = []
            for method in cell_methods:
                rows += self.cell_rows(setting, method) or []
            if rows:
                written.append(write_csv(rows, directory / f"{setting.lower()}.csv"))
        meta = {f"{m['setting']} {m['method']}": m for m in self.metas()}
        (directory / "run.json").write_text(json.dumps({"fingerprint": self.fingerprint, "model": self.model_id,
                                                        "design": asdict(self.design), "cells": meta}, indent=1))
        return written

    def metas(self) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted((self.out_dir / self.fingerprint).glob("*/*/meta.json"))]


def _pil(images: np.ndarray) -> list:
    from PIL import Image

    return [Image.fromarray(a) for a in images]


def write_csv(rows: Sequence[dict], path: Path) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows({k: r[k] for k in CSV_COLUMNS} for r in rows)
    return path


def read_csv(path: Path) -> list[dict]:
    """Rows of a per-image CSV with judge_success as bool, seed as int and dist_to_fp as float."""
    with Path(path).open(newline="") as f:
        rows = list(csv.DictReader(f))
    missing = set(CSV_COLUMNS) - set(rows[0]) if rows else set()
    if missing:
        raise ValueError(f"{path} lacks columns {sorted(missing)}")
    for r in rows:
        r["seed"], r["judge_success"], r["dist_to_fp"] = int(r["seed"]), r["judge_success"] in ("1", "True"), float(r["dist_to_fp"])
    return rows


DEFAULT_SETTINGS = ("W8A8", "W4A8", "W8A4", "W4A4")


def _names(text: str | None, known: Sequence[str], default: Sequence[str], what: str, fail: Callable[[str], None]) -> list[str]:
    if text is None:
        return list(default)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        fail(f"--{what} {text}: choose from {', '.join(known)}")
    return names


def run_command(*, settings, methods, checkpoints, trigger_prompts, seeds, steps, out, csv_dir, judge, threads,
                no_render, load_model, guidance, model_id, concepts, fail) -> None:
    """The body of `personalq bench quality --per-image`: render what is missing (unless `no_render`), export
    the finished cells to CSVs (the caller prints their tables). A cell with any checkpoint missing is left out."""
    import torch

    setting_names = _names(settings and settings.upper(), DEFAULT_SETTINGS, DEFAULT_SETTINGS, "settings", fail)
    method_names = _names(methods, list(METHODS), list(METHODS), "methods", fail)
    if len(concepts) < checkpoints:
        fail(f"--checkpoints {checkpoints}: the repository has {len(concepts)} usable checkpoints")
    design = Design(checkpoints=checkpoints, prompts=trigger_prompts, seeds=seeds or Design.seeds,
                    steps=steps or Design.steps, guidance=guidance)
    pipe, scorer = None, None
    if not no_render:
        torch.set_num_threads(threads)
        pipe, _ = load_model()
        pipe.set_progress_bar_config(disable=True)
        scorer = JudgeScorer(judge)
    run = PairedRun(pipe, concepts, design, scorer, Path(out or "runs/quality-per-image"), model_id=model_id,
                    log=lambda line: print(line, flush=True))
    if not no_render:
        run.run(setting_names, method_names)
    for path in run.export_csv(setting_names, method_names, Path(csv_dir)):
        print(path, flush=True)
