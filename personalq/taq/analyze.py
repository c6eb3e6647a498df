"""Token-sensitivity analysis: how much does the image move when only one token's K/V rows are low-bit?

For each token (a trigger span counts as one unit) every cross-attention layer quantizes just that
token's rows of K and V to `bits` (on their own dynamic grid) while everything else stays full
precision; the image from a fixed seed is compared with the full-precision image (pixel MSE, and a
semantic drift score when an image-text `scorer` is given). Results aggregate over seeds and
checkpoints so that trigger spans can be compared with ordinary tokens.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from personalq.taq.activations import (
    install_activation_quantizers,
    remove_activation_quantizers,
)
from personalq.taq.config import QuantConfig
from personalq.taq.triggers import PROTECT_KWARG, detect_triggers, find_trigger_spans

Scorer = Callable[[object, str], float]
"""(PIL image, text) -> similarity; higher means the image matches the text better."""


@dataclass(frozen=True)
class TokenUnit:
    label: str
    positions: tuple[int, ...]
    is_trigger: bool


@dataclass(frozen=True)
class TokenRecord:
    checkpoint: str
    seed: int
    token: str
    is_trigger: bool
    mse: float
    drift: float | None


def token_units(tokenizer, prompt: str, triggers: list[str] | None = None) -> list[TokenUnit]:
    """The prompt's tokens in order (start and end token included), each trigger span as one unit."""
    ids = tokenizer(prompt, truncation=True, max_length=tokenizer.model_max_length).input_ids
    spans = {span.start: span for span in find_trigger_spans(tokenizer, prompt, triggers)}
    units, seen, position = [], {}, 0
    while position < len(ids):
        if position in spans:
            span = spans[position]
            label, positions, is_trigger = span.trigger, tuple(span.positions), True
        else:
            label, positions, is_trigger = tokenizer.convert_ids_to_tokens(ids[position]).replace("</w>", ""), (position,), False
        seen[label] = seen.get(label, 0) + 1
        units.append(TokenUnit(label if seen[label] == 1 else f"{label}#{seen[label]}", positions, is_trigger))
        position = positions[-1] + 1
    return units


def _generate(pipe, prompt, seed, steps, guidance_scale, keep):
    generator = torch.Generator(pipe.device).manual_seed(seed)
    with torch.no_grad():
        return pipe(
            prompt,
            num_inference_steps=steps,
            guidance_scale=guidance_scale,
            generator=generator,
            output_type="np",
            cross_attention_kwargs={PROTECT_KWARG: keep},
        ).images[0]


def analyze_tokens(
    pipes: dict[str, object],
    prompt: str,
    triggers: list[str] | None = None,
    bits: int = 4,
    seeds: tuple[int, ...] = (0, 1),
    num_inference_steps: int = 10,
    guidance_scale: float = 7.5,
    scorer: Scorer | None = None,
) -> list[TokenRecord]:
    """One record per checkpoint x seed x token unit. Pipelines are restored to their own attention after."""
    triggers = triggers if triggers is not None else detect_triggers(prompt)
    config = QuantConfig(w_bits=32, a_bits=bits, protect="none", calibration="dynamic")
    records = []
    for name, pipe in pipes.items():
        if getattr(pipe.unet, "taq_state", None) is not None:
            raise ValueError(f"{name}: analyze a float checkpoint, not a quantized one")
        units = token_units(pipe.tokenizer, prompt, triggers)
        rows = 2 if guidance_scale > 1 else 1
        install_activation_quantizers(pipe.unet, config, mode="dynamic", points=("k", "v"), layer_inputs=False)
        try:
            for seed in seeds:
                keep_all = torch.ones(rows, pipe.tokenizer.model_max_length, dtype=torch.bool)
                reference = _generate(pipe, prompt, seed, num_inference_steps, guidance_scale, keep_all)
                ref_score = scorer(pipe.numpy_to_pil(reference[None])[0], prompt) if scorer else None
                for unit in units:
                    keep = keep_all.clone()
                    keep[-1, list(unit.positions)] = False  # the conditional row; the unconditional one is untouched
                    image = _generate(pipe, prompt, seed, num_inference_steps, guidance_scale, keep)
                    drift = ref_score - scorer(pipe.numpy_to_pil(image[None])[0], prompt) if scorer else None
                    records.append(TokenRecord(name, seed, unit.label, unit.is_trigger, float(np.mean((image - reference) ** 2)), drift))
        finally:
            remove_activation_quantizers(pipe.unet)
    return records


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _lower_error(metric: str, row: dict) -> float:
    """An MSE cannot fall below zero, so its error bar stops there; drift can be negative."""
    return min(row[metric], row[metric + "_sd"]) if metric == "mse" else row[metric + "_sd"]


def summarize(records: list[TokenRecord]) -> list[dict]:
    """Per token (in prompt order): mean and sd of each metric over seeds and checkpoints."""
    order = list(dict.fromkeys(r.token for r in records))
    rows = []
    for token in order:
        group = [r for r in records if r.token == token]
        row = {"token": token, "is_trigger": group[0].is_trigger, "n": len(group)}
        row["mse"], row["mse_sd"] = _mean_sd([r.mse for r in group])
        drifts = [r.drift for r in group if r.drift is not None]
        row["drift"], row["drift_sd"] = _mean_sd(drifts) if drifts else (None, None)
        rows.append(row)
    return rows


def write_report(records: list[TokenRecord], out_dir: str | Path, bits: int) -> list[Path]:
    """tokens.csv (every record), summary.md (per token, trigger vs other), one bar chart PNG per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "tokens.csv", out / "summary.md"]
    with open(written[0], "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(records[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in records)

    rows = summarize(records)
    metrics = [("mse", "image MSE vs full precision")]
    if any(r.drift is not None for r in records):
        metrics.append(("drift", "semantic drift (score drop)"))
    lines = [
        f"# Token sensitivity: only one token's K/V rows at {bits} bits",
        "",
        "| token | trigger | " + " | ".join(title for _, title in metrics) + " | n |",
        "|---|---|" + "---|" * len(metrics) + "---|",
    ]
    for row in rows:
        cells = [f"{row[m]:.6f} ± {row[m + '_sd']:.6f}" if row[m] is not None else "" for m, _ in metrics]
        lines.append(f"| {row['token']} | {'yes' if row['is_trigger'] else ''} | " + " | ".join(cells) + f" | {row['n']} |")
    lines.append("")
    for metric, title in metrics:
        for label, flag in (("trigger tokens", True), ("other tokens", False)):
            values = [getattr(r, metric) for r in records if r.is_trigger == flag and getattr(r, metric) is not None]
            if values:
                mean, sd = _mean_sd(values)
                lines.append(f"- {title}, {label}: {mean:.6f} ± {sd:.6f} (n={len(values)})")
    (written[1]).write_text("\n".join(lines) + "\n")

    for metric, title in metrics:
        shown = [r for r in rows if r[metric] is not None]
        fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(shown) + 1.5), 3.6))
        bars = ax.bar(
            range(len(shown)),
            [r[metric] for r in shown],
            yerr=[[_lower_error(metric, r) for r in shown], [r[metric + "_sd"] for r in shown]],
            color=["tab:red" if r["is_trigger"] else "tab:gray" for r in shown],
            capsize=2,
        )
        for bar, row in zip(bars, shown):
            if row["is_trigger"]:
                bar.set_hatch("//")
        ax.set_xticks(range(len(shown)), [r["token"] for r in shown], rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(title)
        ax.set_title(f"{title}: one token's K/V at {bits} bits (red = trigger)", fontsize=9)
        fig.tight_layout()
        path = out / f"{metric}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written
