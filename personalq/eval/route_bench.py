"""`personalq bench route`: how much does routing by checkpoint matter once there are many replicas?

A discrete-event simulation, not a measurement: thousands of checkpoints with Zipf-distributed
popularity arrive as a Poisson stream at a pool of identical render replicas, each holding an LRU
cache of checkpoints bounded by a byte budget. Two routers are compared on the same stream:

- random: each request goes to a replica chosen uniformly at random (a plain load balancer);
- multiplexed: Ray Serve's model-multiplexing policy, as its router documents it
  (`MultiplexMixin.apply_multiplex_routing`): candidates are first the replicas that hold the
  checkpoint and are below their ongoing-request limit, else the replicas holding the fewest
  checkpoints, else all; among the candidates, power-of-two choices by queue length.

A replica serves its queue in order, one request at a time: `render_s` per request plus `load_s`
when the checkpoint is not resident (a miss, which loads it and evicts least-recently-used ones).
Replicas see requests in the order routed, so a replica's cache is updated at routing time, as if the
router knew what each replica's queue will have loaded (Ray's replicas report what they hold).

The figures (hit rate, loads per minute, p95 queueing delay) are taken after a warm-up share of the
requests, so cold caches do not dominate them. Everything is seeded: same arguments, same figures.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROUTERS = ("multiplexed", "random")
DEFAULT_REPLICAS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Workload:
    """The traffic and the cost model; `load` is the offered render utilization per replica (0-1)."""

    checkpoints: int = 10_000
    zipf: float = 1.1
    checkpoint_mib: float = 150.0
    size_spread: float = 0.5
    budget_mib: float = 4096.0
    render_s: float = 2.0
    load_s: float = 3.0
    load: float = 0.3
    requests_per_replica: int = 2_000
    warmup: float = 0.2
    max_ongoing: int = 2  # as personalq.cluster deploys it; Ray Serve's own default is 5
    seed: int = 0

    def __post_init__(self):
        if self.checkpoints < 1:
            raise ValueError("checkpoints must be at least 1")
        if self.zipf < 0:
            raise ValueError("the Zipf exponent must be >= 0")
        if self.render_s <= 0 or self.load_s < 0:
            raise ValueError("render_s must be > 0 and load_s >= 0")
        if not 0 < self.load:
            raise ValueError("load must be > 0")
        if self.requests_per_replica < 1 or not 0 <= self.warmup < 1:
            raise ValueError("requests_per_replica must be >= 1 and warmup in [0, 1)")
        if self.max_ongoing < 1:
            raise ValueError("max_ongoing must be at least 1")


@dataclass(frozen=True)
class RouteFigures:
    router: str
    replicas: int
    requests: int
    hit_rate: float
    loads_per_minute: float
    p95_queue_s: float
    mean_queue_s: float


class Replica:
    """One render replica: an LRU cache of checkpoints bounded in bytes, and the finish times of its queue."""

    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self.held: OrderedDict[int, int] = OrderedDict()  # checkpoint -> bytes, least recent first
        self.bytes = 0
        self.free_at = 0.0
        self._finishes: deque[float] = deque()

    def ongoing(self, now: float) -> int:
        while self._finishes and self._finishes[0] <= now:
            self._finishes.popleft()
        return len(self._finishes)

    def holds(self, checkpoint: int) -> bool:
        return checkpoint in self.held

    def serve(self, now: float, checkpoint: int, size: int, render_s: float, load_s: float) -> tuple[bool, float]:
        """Queue one request: (was it a hit, its queueing delay)."""
        hit = checkpoint in self.held
        if hit:
            self.held.move_to_end(checkpoint)
        else:
            while self.bytes + size > self.budget:
                self.bytes -= self.held.popitem(last=False)[1]
            self.held[checkpoint] = size
            self.bytes += size
        start = max(now, self.free_at)
        self.free_at = start + render_s + (0.0 if hit else load_s)
        self._finishes.append(self.free_at)
        return hit, start - now


def _power_of_two(candidates: list[int], replicas: list[Replica], now: float, rng: np.random.Generator) -> int:
    if len(candidates) == 1:
        return candidates[0]
    a, b = rng.choice(len(candidates), size=2, replace=False)
    first, second = candidates[a], candidates[b]
    return first if replicas[first].ongoing(now) <= replicas[second].ongoing(now) else second


def route_multiplexed(replicas: list[Replica], checkpoint: int, now: float, max_ongoing: int, rng: np.random.Generator) -> int:
    """Ray Serve's multiplex hierarchy: holders, else the replicas holding fewest checkpoints, else all.

    A tier counts only replicas below `max_ongoing` requests; when no tier has one, power of two over all.
    """
    fewest = min(len(r.held) for r in replicas)
    tiers = ([i for i, r in enumerate(replicas) if r.holds(checkpoint)],
             [i for i, r in enumerate(replicas) if len(r.held) == fewest],
             list(range(len(replicas))))
    for tier in tiers:
        room = [i for i in tier if replicas[i].ongoing(now) < max_ongoing]
        if room:
            return _power_of_two(room, replicas, now, rng)
    return _power_of_two(tiers[-1], replicas, now, rng)


def route_random(replicas: list[Replica], checkpoint: int, now: float, max_ongoing: int, rng: np.random.Generator) -> int:
    return int(rng.integers(len(replicas)))


_ROUTE = {"multiplexed": route_multiplexed, "random": route_random}


def zipf_probabilities(count: int, exponent: float) -> np.ndarray:
    """P(rank k) proportional to 1/k^exponent over `count` ranks: a few popular checkpoints, a long tail."""
    weights = 1.0 / np.arange(1, count + 1) ** exponent
    return weights / weights.sum()


def checkpoint_sizes(workload: Workload) -> np.ndarray:
    """Bytes of each checkpoint: lognormal around `checkpoint_mib` (spread 0: all equal), seeded."""
    rng = np.random.default_rng([workload.seed, 1])
    median = workload.checkpoint_mib * 2**20
    spread = rng.lognormal(0.0, workload.size_spread, workload.checkpoints) if workload.size_spread > 0 else np.ones(workload.checkpoints)
    return np.maximum(1, (median * spread).astype(np.int64))


def traffic(workload: Workload, replicas: int) -> tuple[np.ndarray, np.ndarray]:
    """(arrival times, checkpoint of each request): Poisson arrivals at `load` x replicas / render_s per second."""
    rng = np.random.default_rng([workload.seed, 2, replicas])
    count = workload.requests_per_replica * replicas
    rate = workload.load * replicas / workload.render_s
    arrivals = np.cumsum(rng.exponential(1.0 / rate, count))
    wanted = rng.choice(workload.checkpoints, size=count, p=zipf_probabilities(workload.checkpoints, workload.zipf))
    return arrivals, wanted


def simulate(workload: Workload, replicas: int, router: str) -> RouteFigures:
    """One router over one pool size; the traffic depends only on (seed, pool size), so routers see the same stream."""
    if replicas < 1:
        raise ValueError("replicas must be at least 1")
    if router not in _ROUTE:
        raise ValueError(f"unknown router {router!r}; choose one of {', '.join(ROUTERS)}")
    sizes = checkpoint_sizes(workload)
    budget = int(workload.budget_mib * 2**20)
    if sizes.max() > budget:
        raise ValueError(f"the largest checkpoint ({sizes.max() / 2**20:.0f} MiB) does not fit a replica's budget ({workload.budget_mib:.0f} MiB)")
    arrivals, wanted = traffic(workload, replicas)
    pool = [Replica(budget) for _ in range(replicas)]
    route, rng = _ROUTE[router], np.random.default_rng([workload.seed, 3, replicas])
    skip = int(len(arrivals) * workload.warmup)
    hits, delays = 0, []
    for n, (now, checkpoint) in enumerate(zip(arrivals.tolist(), wanted.tolist())):
        chosen = route(pool, checkpoint, now, workload.max_ongoing, rng)
        hit, delay = pool[chosen].serve(now, checkpoint, int(sizes[checkpoint]), workload.render_s, workload.load_s)
        if n >= skip:
            hits += hit
            delays.append(delay)
    measured = len(delays)
    minutes = (arrivals[-1] - (arrivals[skip - 1] if skip else 0.0)) / 60
    return RouteFigures(router=router, replicas=replicas, requests=measured, hit_rate=hits / measured,
                        loads_per_minute=float((measured - hits) / minutes) if minutes > 0 else 0.0,
                        p95_queue_s=float(np.percentile(delays, 95)), mean_queue_s=float(np.mean(delays)))


def replay_hit_rate(keys: list, replicas: int, capacity: int, router: str = "random", seed: int = 0) -> float:
    """Hit rate of one exact request sequence through `replicas` LRU caches of `capacity` keys each.

    The baseline a real run is compared with: the same keys, sent in order and one at a time.
    """
    index = {key: n for n, key in enumerate(dict.fromkeys(keys))}
    pool, rng = [Replica(capacity) for _ in range(replicas)], np.random.default_rng(seed)
    hits = 0
    for now, key in enumerate(keys):
        chosen = _ROUTE[router](pool, index[key], float(now), capacity, rng)
        hits += pool[chosen].serve(float(now), index[key], 1, 0.5, 0.0)[0]
    return hits / len(keys) if keys else 0.0


def sweep(workload: Workload, replica_counts=DEFAULT_REPLICAS, routers=ROUTERS) -> list[RouteFigures]:
    return [simulate(workload, n, router) for n in replica_counts for router in routers]


def figures_table(figures: list[RouteFigures]) -> str:
    lines = ["| replicas | router | hit rate | loads / min | p95 queueing (s) | mean queueing (s) |",
             "|---:|---|---:|---:|---:|---:|"]
    lines += [f"| {f.replicas} | {f.router} | {f.hit_rate:.3f} | {f.loads_per_minute:.1f} | {f.p95_queue_s:.2f} | {f.mean_queue_s:.2f} |"
              for f in figures]
    return "\n".join(lines)


def figures_json(workload: Workload, figures: list[RouteFigures]) -> dict:
    return {"workload": asdict(workload), "figures": [asdict(f) for f in figures]}


def plot(figures: list[RouteFigures], path: Path) -> Path:
    """Hit rate, loads per minute and p95 queueing delay against pool size, one line per router."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("hit_rate", "hit rate"), ("loads_per_minute", "loads / minute"), ("p95_queue_s", "p95 queueing delay (s)"))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for axis, (field, label) in zip(axes, panels):
        for router in dict.fromkeys(f.router for f in figures):
            rows = [f for f in figures if f.router == router]
            axis.plot([f.replicas for f in rows], [getattr(f, field) for f in rows], marker="o", label=router)
        axis.set_xscale("log", base=2)
        axis.set_xlabel("replicas")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    delays = [f.p95_queue_s for f in figures]
    if delays and min(delays) > 0:
        axes[2].set_yscale("log")
    axes[0].legend()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
