"""The quality bench's paired statistics on data whose answers are known."""

import numpy as np
import pytest

from personalq.eval.paired_stats import (
    bootstrap_ci,
    cohens_h,
    compare,
    mcnemar,
    mcnemar_exact,
    mcnemar_power,
    wilcoxon_signed_rank,
)


def test_mcnemar_exact_p_value_of_a_known_table():
    # 3 vs 12 discordant pairs: p = 2 * P(X <= 3 | Binomial(15, 1/2)) = 2 * 576 / 32768
    result = mcnemar_exact(3, 12)
    assert result.p_value == pytest.approx(2 * 576 / 2**15, rel=1e-12)
    assert result.odds_ratio == 0.25
    assert mcnemar_exact(0, 0).p_value == 1.0


def test_mcnemar_counts_only_discordant_pairs():
    a = [True, True, False, False, True]
    b = [True, False, True, False, False]
    result = mcnemar(a, b)
    assert (result.only_a, result.only_b) == (2, 1)
    with pytest.raises(ValueError):
        mcnemar([True], [True, False])


def test_wilcoxon_matches_the_example_in_scipys_documentation():
    # Fisher's paired height differences, scipy.stats.wilcoxon docs: statistic 24, exact p 0.04125976...
    d = np.array([6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75])
    result = wilcoxon_signed_rank(d, np.zeros_like(d))
    assert result.statistic == 24.0
    assert result.p_value == pytest.approx(0.041259765625, rel=1e-9)
    assert result.rank_biserial == pytest.approx((96 - 24) / 120)  # negative ranks 10 + 14 of 1..15


def test_bootstrap_ci_covers_a_known_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    trials = 200
    covered = sum(lo <= 3.0 <= hi for lo, hi in (bootstrap_ci(rng.normal(3.0, 1.0, 60), n_resamples=999, seed=i) for i in range(trials)))
    assert 0.88 <= covered / trials <= 0.99
    assert bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)


def test_mcnemar_power_has_the_tests_size_under_h0_and_matches_simulation():
    assert mcnemar_power(100, 0.1, 0.1, alpha=0.05) <= 0.05
    rng = np.random.default_rng(3)
    n, only_a, only_b, sims = 40, 0.3, 0.05, 2000
    draws = rng.multinomial(n, [only_a, only_b, 1 - only_a - only_b], size=sims)
    simulated = np.mean([mcnemar_exact(int(x), int(y)).p_value < 0.05 for x, y, _ in draws])
    assert mcnemar_power(n, only_a, only_b, alpha=0.05) == pytest.approx(simulated, abs=0.04)
    assert mcnemar_power(240, 0.15, 0.05) > mcnemar_power(120, 0.15, 0.05)


def test_compare_reports_rates_distances_and_effect_sizes_of_paired_methods():
    a = [True] * 30 + [False] * 10
    b = [True] * 20 + [False] * 20
    da = np.linspace(0.1, 0.2, 40)
    result = compare(a, b, da, da + 0.05)
    assert result.n == 40 and result.success_a == 0.75 and result.success_b == 0.5
    assert (result.mcnemar.only_a, result.mcnemar.only_b) == (10, 0)
    assert result.success_difference_ci[0] > 0 and result.wilcoxon.rank_biserial == -1.0
    assert result.distance_a_ci[0] <= da.mean() <= result.distance_a_ci[1]
    assert result.cohens_h == pytest.approx(cohens_h(0.75, 0.5)) and result.cohens_h > 0
