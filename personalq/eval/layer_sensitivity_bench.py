"""`personalq bench layers`: which activation quantizers cost the personal concept at 4-bit activations,
and whether calibration fixes it.

The quality benchmark (issue #9) finds every method, TAQ included, losing the concept at W8A4/W4A4 on
PQ-Nano, with plain world captions collapsing as badly. This benchmark takes that one setting apart,
against the full-precision images of the same prompts and seeds:

1. Which layers hurt. The UNet is quantized once as serving does (TAQ protection, static per-tensor
   ranges calibrated on the default `<sks>` prompts), then rendered with only one group of activation
   points active and every other point passing through ("off"); "none" is the weights alone, "all" is
   the setting.
2. Calibration. All points active, with ranges (a) from the `<sks>` prompts (serving), (b) from
   prompts in PQ-Nano's own words (world captions with the concept's trigger or class noun, none of
   them a measured prompt), (c) measured on every call (dynamic).

Each row reports the mean |pixel difference| from the full-precision image (0-255) on trigger images
(personal LoRAs attached) and on plain world captions (LoRAs off), and the judge's trigger fidelity.
Concepts, prompts, latents and scoring are the quality benchmark's.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from personalq.eval.quality_bench import (
    CALIBRATION_TRIGGER,
    BenchPrompt,
    BenchSize,
    Concept,
    JudgeScorer,
    _adapter,
    bench_prompts,
    mean_ci95,
    render_prompts,
    world_trigger_prompts,
)

PROTECT = "trigger"
"""Serving's TAQ protection; it only touches the cross-attention text/K/V/A points of trigger rows."""

GROUPS: tuple[tuple[str, str], ...] = (
    ("cross-attn text (K/V input)", r":text$"),
    ("cross-attn Q/K/V/A", r":[qkva]$"),
    ("attention in/out projections", r"\.attn[12]\.(to_q|to_k|to_v|to_out\.0)$"),
    ("feed-forward", r"\.ff\."),
    ("transformer proj_in/proj_out", r"\.proj_(in|out)$"),
    ("ResNet convs", r"\.resnets\.\d+\.(conv1|conv2|conv_shortcut)$"),
    ("time embedding", r"(\.time_emb_proj$|^time_embedding\.|^add_embedding\.)"),
    ("samplers, conv_in/conv_out", r"(samplers\.\d+\.conv$|^conv_in$|^conv_out$)"),
)
"""Group name -> pattern over activation point names (a layer's name, or "attention:text/q/k/v/a"), in
report order. The patterns are exclusive: `group_points` refuses a point that matches none or two."""

DEFAULT_SIZE = BenchSize(concepts=2, trigger_prompts=4, world_captions=4, seeds=2, steps=20, calibration_prompts=16,
                         settings=("W8A4",), ablation_setting="W8A4")
WORLD_CALIBRATION_SEED = 7000
"""world_trigger_prompts seeds for calibration (b); the measured ones use seeds 0.. (one per concept)."""


def group_points(names: Sequence[str]) -> dict[str, list[str]]:
    """Every activation point in exactly one group of `GROUPS` (all groups listed, maybe empty)."""
    groups: dict[str, list[str]] = {group: [] for group, _ in GROUPS}
    for name in names:
        hits = [group for group, pattern in GROUPS if re.search(pattern, name)]
        if len(hits) != 1:
            raise ValueError(f"activation point {name!r} falls in {len(hits)} groups ({', '.join(hits) or 'none'}); it must fall in exactly one")
        groups[hits[0]].append(name)
    return groups


def world_calibration_prompts(concepts: Sequence[Concept], n: int, exclude: Sequence[str] = ()) -> list[str]:
    """`n` distinct prompts in PQ-Nano's words ("a watercolor <dog-v1> in the park", "a cartoon dog on the
    beach"): trigger and class-noun versions alternating, concepts interleaved, none of `exclude`."""
    excluded, picked = set(exclude), []
    words = [(c.trigger, c.class_noun)[k] for k in (0, 1) for c in concepts]
    draws = [iter(world_trigger_prompts(64, seed=WORLD_CALIBRATION_SEED + j, trigger=w)) for j, w in enumerate(words)]
    order = [draws[j + k * len(concepts)] for j in range(len(concepts)) for k in (0, 1)]
    while len(picked) < n and order:
        for draw in list(order):
            text = next((t for t in draw if t not in excluded and t not in picked), None)
            if text is None:
                order.remove(draw)
            elif len(picked) < n:
                picked.append(text)
    if len(picked) < n:
        raise ValueError(f"only {len(picked)} distinct world calibration prompts for {len(concepts)} concepts, {n} asked")
    return picked


# ---- rendering -----------------------------------------------------------------------------------


def _fresh_pipe(pipe):
    """`pipe` with its own copy of the UNet (text encoder, tokenizer and VAE shared), as the quality bench does."""
    fresh = copy.copy(pipe)
    fresh.register_modules(unet=copy.deepcopy(pipe.unet))
    return fresh


def render(pipe, concepts: Sequence[Concept], prompts: Sequence[BenchPrompt], steps: int, guidance: float, quantized: bool):
    """The quality bench's rendering (same latents, LoRA per concept) with TAQ's protection, as serving runs it."""
    return render_prompts(pipe, concepts, prompts, steps, guidance, PROTECT, quantized)[0]


def set_active(state, active: set[str] | None, mode: str = "static") -> None:
    """Points in `active` (every point for None) quantize in `mode`; all others pass through."""
    for name, quantizer in state.quantizers.items():
        quantizer.mode = mode if active is None or name in active else "off"


# ---- the run -------------------------------------------------------------------------------------


@dataclass
class LayerBench:
    pipe: object
    concepts: list[Concept]
    scorer: JudgeScorer
    setting: str = "W8A4"
    size: BenchSize = DEFAULT_SIZE
    guidance: float = 4.0
    log: Callable[[str], None] = print

    def __post_init__(self):
        self.prompts = bench_prompts(self.concepts, self.size)
        self.trigger = np.array([p.concept is not None for p in self.prompts])

    def quantized_pipe(self, calibration_prompts: list[str]):
        """A fresh UNet quantized to the setting as serving does, calibrated on `calibration_prompts`, LoRAs attached."""
        from personalq.taq import QuantConfig, quantize

        pipe = _fresh_pipe(self.pipe)
        config = QuantConfig.from_setting(self.setting, protect=PROTECT)
        quantize(pipe, config, calibration_prompts=calibration_prompts, num_inference_steps=self.size.steps)
        return self.attach(pipe)

    def attach(self, pipe):
        from personalq.personalize import attach_personalized_lora

        for concept in self.concepts:
            attach_personalized_lora(pipe, concept.lora_path, adapter_name=_adapter(concept))
        return pipe

    def row(self, table: str, name: str, images, reference: np.ndarray | None, points: int | None, seconds: float) -> dict:
        arrays = np.stack([np.asarray(im.convert("RGB")) for im in images])
        change = np.zeros(len(arrays)) if reference is None else np.abs(arrays.astype(float) - reference).mean(axis=(1, 2, 3))
        hits = []
        for concept in self.concepts:
            idx = [i for i, p in enumerate(self.prompts) if p.concept == concept.name]
            hits += self.scorer.looks_found([images[i] for i in idx], concept.looks_dict)
        plain = [i for i, p in enumerate(self.prompts) if p.concept is None]
        alignment = self.scorer.alignment([images[i] for i in plain], [self.prompts[i].named for i in plain],
                                          [self.prompts[i].attrs for i in plain]) if plain else []
        (fid, fid_ci), (ali, ali_ci) = mean_ci95([float(h) for h in hits]), mean_ci95(alignment)
        (tri, tri_ci), (pla, pla_ci) = mean_ci95(change[self.trigger]), mean_ci95(change[~self.trigger])
        self.log(f"{table}: {name}: trigger change {tri:.1f}, plain change {pla:.1f}, fidelity {fid:.3f}, {seconds:.0f} s")
        return {"table": table, "row": name, "points": points,
                "trigger_change": tri, "trigger_change_ci95": tri_ci, "plain_change": pla, "plain_change_ci95": pla_ci,
                "trigger_fidelity": fid, "trigger_fidelity_ci95": fid_ci, "alignment": ali, "alignment_ci95": ali_ci,
                "n_trigger": int(self.trigger.sum()), "n_plain": int((~self.trigger).sum()),
                "fidelity_hits": [bool(h) for h in hits], "change_per_image": [round(float(c), 3) for c in change],
                "seconds": seconds, "_arrays": arrays}

    def run(self) -> dict:
        from personalq.taq import calibration_prompts

        started = time.perf_counter()
        rows = []

        def measure(table, name, pipe, points=None, quantized=True):
            t0 = time.perf_counter()
            images = render(pipe, self.concepts, self.prompts, self.size.steps, self.guidance, quantized)
            reference = rows[0]["_arrays"].astype(float) if rows else None
            rows.append(self.row(table, name, images, reference, points, time.perf_counter() - t0))
            return rows[-1]

        measure("reference", "full precision", self.attach(_fresh_pipe(self.pipe)), quantized=False)
        sks_prompts = calibration_prompts(n=self.size.calibration_prompts, trigger=CALIBRATION_TRIGGER)
        world_prompts = world_calibration_prompts(self.concepts, self.size.calibration_prompts, [p.text for p in self.prompts])

        t0 = time.perf_counter()
        pipe = self.quantized_pipe(sks_prompts)
        self.log(f"quantized to {self.setting} and calibrated on {len(sks_prompts)} <sks> prompts: {time.perf_counter() - t0:.0f} s")
        state = pipe.unet.taq_state
        groups = group_points(list(state.quantizers))
        set_active(state, set())
        measure("layers", "none (weights only)", pipe, points=0)
        for group, names in groups.items():
            if names:
                set_active(state, set(names))
                measure("layers", group, pipe, points=len(names))
        set_active(state, None)
        everything = measure("layers", f"all (= {self.setting})", pipe, points=len(state.quantizers))
        rows.append({**everything, "table": "calibration", "row": "(a) static, <sks> prompts (serving)"})
        set_active(state, None, "dynamic")
        measure("calibration", "(c) dynamic, per-call ranges", pipe, points=len(state.quantizers))
        set_active(state, None)

        t0 = time.perf_counter()
        world = self.quantized_pipe(world_prompts)
        self.log(f"calibrated on {len(world_prompts)} world prompts: {time.perf_counter() - t0:.0f} s")
        measure("calibration", "(b) static, PQ-Nano world prompts", world, points=len(world.unet.taq_state.quantizers))
        rows = rows[:1] + [r for r in rows[1:] if r["table"] == "layers"] + sorted((r for r in rows if r["table"] == "calibration"), key=lambda r: r["row"])
        return {
            "setting": self.setting, "protect": PROTECT, "concepts": [c.name for c in self.concepts],
            "steps": self.size.steps, "seeds": self.size.seeds, "guidance": self.guidance,
            "prompts": [{"text": p.text, "seed": p.seed, "concept": p.concept} for p in self.prompts],
            "calibration_prompts": {"<sks>": sks_prompts, "world": world_prompts},
            "groups": groups, "seconds": time.perf_counter() - started, "rows": rows,
        }


# ---- reporting -----------------------------------------------------------------------------------


def _pm(row: dict, key: str, scale: float = 1.0) -> str:
    return f"{scale * row[key]:.1f} ± {scale * row[key + '_ci95']:.1f}"


def table(result: dict, name: str) -> str:
    """One table: the full-precision reference, then the rows of `name` ("layers" or "calibration")."""
    head = ("| active quantizers | points | Δ trigger images | Δ plain captions | trigger fidelity % | caption alignment % | n trigger / plain |"
            if name == "layers" else
            "| ranges (all points active) | points | Δ trigger images | Δ plain captions | trigger fidelity % | caption alignment % | n trigger / plain |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    for row in [result["rows"][0]] + [r for r in result["rows"] if r["table"] == name]:
        points = "–" if row["points"] is None else str(row["points"])
        delta = ("0", "0") if row["table"] == "reference" else (_pm(row, "trigger_change"), _pm(row, "plain_change"))
        lines.append(f"| {row['row']} | {points} | {delta[0]} | {delta[1]} | {_pm(row, 'trigger_fidelity', 100)} "
                     f"| {_pm(row, 'alignment', 100)} | {row['n_trigger']} / {row['n_plain']} |")
    return "\n".join(lines)


def report(result: dict) -> str:
    s = result["setting"]
    return "\n\n".join([
        f"## Which layers hurt at {s}: only one group of activation points quantized (TAQ, static ranges from the <sks> prompts)",
        "Δ: mean |pixel difference| from the full-precision image of the same prompt and seed (0-255), ± 95% interval.",
        table(result, "layers"),
        f"## Calibration at {s}: every activation point quantized, ranges from",
        table(result, "calibration"),
    ])


def image_grid(result: dict, path: Path, columns: int = 6):
    """One line per row: its first trigger image of each concept (seed 0), then plain captions, labelled."""
    from PIL import Image, ImageDraw

    prompts = result["prompts"]
    picks, seen = [], set()
    for i, p in enumerate(prompts):
        if p["concept"] is not None and p["concept"] not in seen:
            seen.add(p["concept"])
            picks.append(i)
    picks += [i for i, p in enumerate(prompts) if p["concept"] is None][: max(0, columns - len(picks))]
    rows = [r for r in result["rows"] if r["row"] != "(a) static, <sks> prompts (serving)"]
    side = rows[0]["_arrays"].shape[1]
    label = 220
    grid = Image.new("RGB", (label + side * len(picks), side * len(rows)), "white")
    draw = ImageDraw.Draw(grid)
    for y, row in enumerate(rows):
        draw.text((4, y * side + side // 2 - 6), row["row"][:36], fill="black")
        for x, i in enumerate(picks):
            grid.paste(Image.fromarray(row["_arrays"][i]), (label + x * side, y * side))
    grid.save(path)
    return path


def write_report(result: dict, out: str | Path) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = report(result)
    (out / "report.md").write_text(text + "\n")
    grid = image_grid(result, out / "grid.png")
    serializable = {**result, "rows": [{k: v for k, v in r.items() if k != "_arrays"} for r in result["rows"]]}
    (out / "results.json").write_text(json.dumps(serializable, indent=1))
    np.savez_compressed(out / "images.npz", **{f"{i:02d}": r["_arrays"] for i, r in enumerate(result["rows"])})
    return [out / "report.md", out / "results.json", grid]


def bench_size(concepts: int = DEFAULT_SIZE.concepts, seeds: int = DEFAULT_SIZE.seeds, steps: int = DEFAULT_SIZE.steps, setting: str = "W8A4") -> BenchSize:
    return replace(DEFAULT_SIZE, concepts=concepts, seeds=seeds, steps=steps, settings=(setting,), ablation_setting=setting)
