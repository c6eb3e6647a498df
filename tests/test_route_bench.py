"""The routing simulation on cases whose answer is known without running it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from personalq.eval.route_bench import (
    Replica,
    Workload,
    route_multiplexed,
    simulate,
    sweep,
    zipf_probabilities,
)

SMALL = dict(checkpoints=200, requests_per_replica=400, checkpoint_mib=100, size_spread=0.0, budget_mib=1000)


def test_one_replica_both_routers_are_the_same_server():
    workload = Workload(**SMALL)
    multiplexed, random = simulate(workload, 1, "multiplexed"), simulate(workload, 1, "random")
    assert (multiplexed.hit_rate, multiplexed.p95_queue_s, multiplexed.loads_per_minute) == (
        random.hit_rate, random.p95_queue_s, random.loads_per_minute)


def test_budget_for_every_checkpoint_loads_each_once():
    """After the warm-up every checkpoint that was asked for is resident: hit rate 1, no loads.

    (With room for every request at its holder, so the multiplexed router never has to load a second copy.)
    """
    workload = Workload(checkpoints=20, requests_per_replica=2000, zipf=0.0, checkpoint_mib=10, size_spread=0.0,
                        budget_mib=200, warmup=0.5, max_ongoing=10_000)
    for router in ("multiplexed", "random"):
        figures = simulate(workload, 4, router)
        assert figures.hit_rate == 1.0 and figures.loads_per_minute == 0.0


def test_budget_of_one_checkpoint_misses_whenever_the_checkpoint_changes():
    workload = Workload(checkpoints=2, zipf=0.0, checkpoint_mib=10, size_spread=0.0, budget_mib=15, requests_per_replica=4000, warmup=0.0)
    # one replica, two equally likely checkpoints, room for one: a hit exactly when the previous request asked for the same
    assert simulate(workload, 1, "random").hit_rate == pytest.approx(0.5, abs=0.03)


def test_multiplexed_routing_beats_random_once_the_pool_outgrows_one_cache():
    workload = Workload(**SMALL)
    for replicas in (4, 16):
        multiplexed, random = simulate(workload, replicas, "multiplexed"), simulate(workload, replicas, "random")
        assert multiplexed.hit_rate > random.hit_rate + 0.1
        assert multiplexed.loads_per_minute < random.loads_per_minute


def test_idle_traffic_never_queues():
    workload = Workload(**{**SMALL, "load": 1e-4})
    assert simulate(workload, 4, "random").p95_queue_s == 0.0


def test_same_seed_same_figures_other_seed_other_figures():
    a, b = sweep(Workload(**SMALL), (2,)), sweep(Workload(**SMALL), (2,))
    assert a == b
    assert sweep(Workload(**{**SMALL, "seed": 1}), (2,)) != a


def test_multiplexed_prefers_a_holder_and_skips_a_full_one():
    rng = np.random.default_rng(0)
    pool = [Replica(100) for _ in range(3)]
    pool[2].serve(0.0, checkpoint=7, size=10, render_s=1.0, load_s=0.0)
    assert all(route_multiplexed(pool, 7, 0.5, max_ongoing=2, rng=rng) == 2 for _ in range(20))
    pool[2].serve(0.5, checkpoint=7, size=10, render_s=1.0, load_s=0.0)  # now 2 ongoing: at its limit
    assert all(route_multiplexed(pool, 7, 0.5, max_ongoing=2, rng=rng) in (0, 1) for _ in range(20))


def test_lru_evicts_by_bytes():
    replica = Replica(25)
    for checkpoint in (1, 2, 1, 3):  # 1 was used after 2, so 2 goes when 3 needs room
        replica.serve(0.0, checkpoint, 10, 1.0, 0.0)
    assert list(replica.held) == [1, 3] and replica.bytes == 20


def test_zipf_probabilities():
    p = zipf_probabilities(4, 1.0)
    assert p.sum() == pytest.approx(1.0) and p[0] / p[3] == pytest.approx(4.0)
    assert np.allclose(zipf_probabilities(5, 0.0), 0.2)


@pytest.mark.parametrize("bad", [dict(checkpoints=0), dict(load=0.0), dict(warmup=1.0), dict(render_s=0.0), dict(max_ongoing=0)])
def test_bad_workloads_are_refused(bad):
    with pytest.raises(ValueError):
        Workload(**bad)


def test_a_checkpoint_larger_than_the_budget_is_refused():
    with pytest.raises(ValueError, match="does not fit"):
        simulate(Workload(**{**SMALL, "budget_mib": 50}), 2, "random")


def test_cli_prints_the_table_and_writes_the_plot(tmp_path):
    from personalq.cli import app

    plot, figures = tmp_path / "route.png", tmp_path / "route.json"
    result = CliRunner().invoke(app, ["bench", "route", "--checkpoints", "300", "--replicas", "1,4",
                                      "--requests-per-replica", "200", "--plot", str(plot), "--json", str(figures)])
    assert result.exit_code == 0, result.output
    assert "| 4 | multiplexed |" in result.output and "| 4 | random |" in result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(json.loads(figures.read_text())["figures"]) == 4


@pytest.mark.parametrize("replicas", ["0", "two", ""])
def test_cli_refuses_bad_replica_counts(replicas, tmp_path):
    from personalq.cli import app

    result = CliRunner().invoke(app, ["bench", "route", "--replicas", replicas, "--plot", str(tmp_path / "p.png")])
    assert result.exit_code == 2 and "--replicas" in result.output


def test_replay_hit_rate_on_sequences_with_known_answers():
    from personalq.eval.route_bench import replay_hit_rate

    assert replay_hit_rate(["a", "b"] * 50, replicas=1, capacity=2) == pytest.approx(98 / 100)  # two cold misses
    assert replay_hit_rate(["a", "b", "c"] * 30, replicas=1, capacity=2) == 0.0  # LRU's worst case: a cycle one longer
    cycle = [str(i) for i in range(6)] * 40  # 6 keys, 2 replicas of 3: multiplexing can keep them all, random cannot
    assert replay_hit_rate(cycle, 2, 3, "multiplexed") > 0.9 > replay_hit_rate(cycle, 2, 3, "random")
