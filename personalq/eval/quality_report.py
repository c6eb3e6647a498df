"""Tables and a verdict from the per-image CSVs of `personalq bench quality --per-image`.

Everything is computed from the committed CSVs alone (docs/results/quality/), so anyone can re-derive
the BENCHMARKS.md tables without rendering: per setting, each method's judge success rate and mean
distance to the full-precision image with 95% bootstrap intervals, and paired tests against plain PTQ
and against the best baseline (exact McNemar on success, Wilcoxon signed-rank on distance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from personalq.eval.paired_quality import BASELINE, FP_METHOD, FP_SETTING, TAQ_METHODS, read_csv
from personalq.eval.paired_stats import bootstrap_ci, mcnemar, wilcoxon_signed_rank

TARGET_GAIN = 0.10
TARGET_ALPHA = 0.01
TARGET_FP_GAP = 0.03
LOW_ACTIVATION_SETTINGS = ("W8A4", "W4A4")


@dataclass(frozen=True)
class Cell:
    """One method's per-image results at one setting, aligned on (checkpoint, prompt, seed)."""

    method: str
    success: np.ndarray
    distance: np.ndarray


def cells_by_setting(rows: Sequence[dict]) -> dict[str, dict[str, Cell]]:
    """setting -> method -> Cell, every cell ordered by the same image keys; a cell that lacks an image
    another cell of its setting has is an error (the comparison would no longer be paired)."""
    grouped: dict[str, dict[str, dict[tuple, dict]]] = {}
    for r in rows:
        key = (r["checkpoint"], r["prompt"], r["seed"])
        cell = grouped.setdefault(r["setting"], {}).setdefault(r["method"], {})
        if key in cell:
            raise ValueError(f"{r['setting']} {r['method']}: image {key} appears twice")
        cell[key] = r
    out = {}
    for setting, methods in grouped.items():
        keys = sorted(next(iter(methods.values())))
        out[setting] = {}
        for method, cell in methods.items():
            if sorted(cell) != keys:
                raise ValueError(f"{setting} {method}: not the same images as the other methods of {setting}")
            out[setting][method] = Cell(method, np.array([cell[k]["judge_success"] for k in keys], dtype=bool),
                                        np.array([cell[k]["dist_to_fp"] for k in keys], dtype=float))
    return out


def load(directory: Path) -> tuple[Cell | None, dict[str, dict[str, Cell]]]:
    """The full-precision reference cell and the quantized settings' cells from a CSV folder."""
    rows = [r for path in sorted(Path(directory).glob("*.csv")) for r in read_csv(path)]
    cells = cells_by_setting(rows)
    fp = cells.pop(FP_SETTING, {}).get(FP_METHOD)
    return fp, cells


def best_baseline(methods: dict[str, Cell]) -> str | None:
    """The non-TAQ method with the highest success rate (ties: the smaller distance to FP)."""
    baselines = [c for m, c in methods.items() if m not in TAQ_METHODS]
    if not baselines:
        return None
    return max(baselines, key=lambda c: (c.success.mean(), -c.distance.mean())).method


def _pct_ci(values: np.ndarray) -> str:
    lo, hi = bootstrap_ci(values.astype(float))
    return f"{100 * values.mean():.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def _dist_ci(values: np.ndarray) -> str:
    lo, hi = bootstrap_ci(values)
    return f"{values.mean():.2f} [{lo:.2f}, {hi:.2f}]"


def _p(value: float) -> str:
    return f"{value:.2g}" if value >= 1e-4 else "< 1e-4"


def _versus(cell: Cell, other: Cell | None) -> str:
    """'+d pts, McNemar p / Wilcoxon p' of `cell` against `other` on the same images."""
    if other is None or other is cell:
        return "–"
    gain = 100 * (cell.success.mean() - other.success.mean())
    return (f"{gain:+.1f} pts, p = {_p(mcnemar(cell.success, other.success).p_value)}; "
            f"dist p = {_p(wilcoxon_signed_rank(cell.distance, other.distance).p_value)}")


def setting_table(setting: str, methods: dict[str, Cell], fp: Cell | None) -> str:
    """Methods as rows: n, success % [95% CI], distance to FP [95% CI], gap to FP, and paired tests
    against plain PTQ and against the best baseline."""
    best = best_baseline(methods)
    lines = [f"**{setting}** (best baseline: {best})", "",
             "| method | n | judge success % [95% CI] | dist to FP (0-255) [95% CI] | vs FP (pts [95% CI]) "
             "| vs plain PTQ (success; McNemar p; Wilcoxon p on dist) | vs best baseline |",
             "|---|---:|---:|---:|---:|---|---|"]
    if fp is not None:
        lines.append(f"| full precision | {fp.success.size} | {_pct_ci(fp.success)} | 0 | – | – | – |")
    for method, cell in methods.items():
        gap = "–"
        if fp is not None and fp.success.size == cell.success.size:
            diff = cell.success.astype(float) - fp.success.astype(float)
            lo, hi = bootstrap_ci(diff)
            gap = f"{100 * diff.mean():+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        lines.append(f"| {method} | {cell.success.size} | {_pct_ci(cell.success)} | {_dist_ci(cell.distance)} | {gap} "
                     f"| {_versus(cell, methods.get(BASELINE))} | {_versus(cell, methods.get(best) if best else None)} |")
    return "\n".join(lines)


def verdict(setting: str, methods: dict[str, Cell], fp: Cell | None) -> str:
    """The issue's target for one setting, stated as met or not met from the numbers."""
    taq, plain = methods.get("TAQ"), methods.get(BASELINE)
    if taq is None or plain is None:
        return f"{setting}: TAQ or plain PTQ missing, no verdict."
    gain = taq.success.mean() - plain.success.mean()
    p = mcnemar(taq.success, plain.success).p_value
    text = (f"{setting}: TAQ {100 * taq.success.mean():.1f} % vs plain PTQ {100 * plain.success.mean():.1f} % "
            f"({100 * gain:+.1f} points, McNemar p = {_p(p)})")
    if setting in LOW_ACTIVATION_SETTINGS:
        met = gain >= TARGET_GAIN and p < TARGET_ALPHA
        return text + f": target (>= +10 points with p < 0.01) {'MET' if met else 'NOT met'}."
    if setting == "W8A8" and fp is not None:
        # "Within 3 points" is a claim of equivalence: it holds only when the whole 95% interval of the
        # paired gap lies inside +-3 points, not when the point estimate alone does.
        diff = taq.success.astype(float) - fp.success.astype(float)
        lo, hi = bootstrap_ci(diff)
        met = -TARGET_FP_GAP <= lo and hi <= TARGET_FP_GAP
        state = "MET" if met else ("NOT established (the interval reaches past 3 points)" if abs(diff.mean()) <= TARGET_FP_GAP else "NOT met")
        return text + (f"; TAQ vs full precision {100 * diff.mean():+.1f} points [95% CI {100 * lo:+.1f}, {100 * hi:+.1f}]: "
                       f"target (within 3 points of FP) {state}.")
    return text + "."


def report(directory: Path, order: Sequence[str] = ("W8A8", "W4A8", "W8A4", "W4A4")) -> str:
    """Markdown: one table per setting found in the CSVs (in `order`), then the verdict lines."""
    fp, cells = load(directory)
    settings = [s for s in order if s in cells] + [s for s in cells if s not in order]
    parts = [setting_table(s, cells[s], fp) for s in settings]
    parts.append("\n".join(f"- {verdict(s, cells[s], fp)}" for s in settings))
    return "\n\n".join(parts) + "\n"
