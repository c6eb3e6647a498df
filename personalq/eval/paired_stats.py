"""Paired statistics for the quality bench: two methods rendered the same (checkpoint, prompt, seed) images.

Pairing is what gives these tests their power: the same prompt and noise are hard or easy for both
methods, so only the images where the methods disagree carry evidence (McNemar), and per-image
distances are compared as differences (Wilcoxon signed-rank). scipy does the distributions; this
module only says which test answers which question.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class McNemar:
    """Discordant pairs (only_a: a succeeded, b failed; only_b the reverse) and the exact two-sided p-value."""

    only_a: int
    only_b: int
    p_value: float

    @property
    def odds_ratio(self) -> float:
        """only_a / only_b, the conditional odds that a discordant pair favours a (inf when b never wins)."""
        return math.inf if self.only_b == 0 else self.only_a / self.only_b


def mcnemar_exact(only_a: int, only_b: int) -> McNemar:
    """Exact McNemar: under H0 each discordant pair favours a with probability 1/2 (a binomial test)."""
    total = only_a + only_b
    p = 1.0 if total == 0 else stats.binomtest(only_a, total, 0.5).pvalue
    return McNemar(only_a, only_b, float(p))


def mcnemar(success_a: Sequence[bool], success_b: Sequence[bool]) -> McNemar:
    a, b = _paired_arrays(success_a, success_b, bool)
    return mcnemar_exact(int(np.sum(a & ~b)), int(np.sum(~a & b)))


@dataclass(frozen=True)
class Wilcoxon:
    """Signed-rank test of paired differences a - b; `rank_biserial` in [-1, 1] is its effect size (> 0: a larger)."""

    statistic: float
    p_value: float
    rank_biserial: float


def wilcoxon_signed_rank(a: Sequence[float], b: Sequence[float]) -> Wilcoxon:
    """scipy's two-sided signed-rank test (zero differences dropped) with the matched-pairs rank-biserial correlation."""
    x, y = _paired_arrays(a, b, float)
    diff = x - y
    diff = diff[diff != 0]
    if diff.size == 0:
        return Wilcoxon(0.0, 1.0, 0.0)
    result = stats.wilcoxon(diff)
    ranks = stats.rankdata(np.abs(diff))
    positive, negative = ranks[diff > 0].sum(), ranks[diff < 0].sum()
    return Wilcoxon(float(result.statistic), float(result.pvalue), float((positive - negative) / ranks.sum()))


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, n_resamples: int = 9999, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean (scipy.stats.bootstrap), reproducible by `seed`."""
    data = np.asarray(values, dtype=float)
    if data.size < 2 or np.all(data == data[0]):
        return float(data.mean()), float(data.mean())
    result = stats.bootstrap((data,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                             method="percentile", random_state=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def cohens_h(rate_a: float, rate_b: float) -> float:
    """Effect size of a difference between two success rates: 2 asin(sqrt(p_a)) - 2 asin(sqrt(p_b))."""
    return 2 * math.asin(math.sqrt(rate_a)) - 2 * math.asin(math.sqrt(rate_b))


def mcnemar_power(n: int, only_a: float, only_b: float, alpha: float = 0.01) -> float:
    """Exact power of the two-sided exact McNemar test at level `alpha` over `n` pairs.

    `only_a`/`only_b` are the probabilities that a pair is discordant in a's / b's favour (their
    difference is the success-rate difference to detect). The number of discordant pairs is
    Binomial(n, only_a + only_b); given d of them, a's count is Binomial(d, only_a / (only_a + only_b)),
    and the test rejects where the exact binomial p-value is below alpha.
    """
    discordant = only_a + only_b
    if discordant <= 0:
        return 0.0
    share = only_a / discordant
    power = 0.0
    for d in range(1, n + 1):
        k = np.arange(d + 1)
        tail = np.minimum(1.0, 2 * np.minimum(stats.binom.cdf(k, d, 0.5), stats.binom.sf(k - 1, d, 0.5)))
        reject = tail < alpha
        if reject.any():
            power += stats.binom.pmf(d, n, discordant) * stats.binom.pmf(k[reject], d, share).sum()
    return float(power)


@dataclass(frozen=True)
class PairedComparison:
    """Method a against method b on the same images: rates, distances, their CIs, tests and effect sizes."""

    n: int
    success_a: float
    success_a_ci: tuple[float, float]
    success_b: float
    success_difference_ci: tuple[float, float]
    distance_a: float
    distance_a_ci: tuple[float, float]
    mcnemar: McNemar
    wilcoxon: Wilcoxon
    cohens_h: float


def compare(success_a: Sequence[bool], success_b: Sequence[bool], distance_a: Sequence[float], distance_b: Sequence[float], seed: int = 0) -> PairedComparison:
    """All paired statistics of a vs b; the four sequences are aligned image by image."""
    sa, sb = _paired_arrays(success_a, success_b, float)
    da, db = _paired_arrays(distance_a, distance_b, float)
    if sa.size != da.size:
        raise ValueError("success and distance sequences must cover the same images")
    return PairedComparison(
        n=int(sa.size),
        success_a=float(sa.mean()),
        success_a_ci=bootstrap_ci(sa, seed=seed),
        success_b=float(sb.mean()),
        success_difference_ci=bootstrap_ci(sa - sb, seed=seed),
        distance_a=float(da.mean()),
        distance_a_ci=bootstrap_ci(da, seed=seed),
        mcnemar=mcnemar(sa.astype(bool), sb.astype(bool)),
        wilcoxon=wilcoxon_signed_rank(da, db),
        cohens_h=cohens_h(float(sa.mean()), float(sb.mean())),
    )


def _paired_arrays(a: Sequence, b: Sequence, dtype) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=dtype), np.asarray(b, dtype=dtype)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"paired samples must be two non-empty 1-D sequences of equal length, got {x.shape} and {y.shape}")
    return x, y
