"""The same renders on a loopback Ray cluster: 2 replicas, 200 requests, 20 demo checkpoints at two settings.

Every image must equal, within a stated tolerance, the in-process render of the same (checkpoint,
setting, seed); the references of different checkpoints differ far beyond that tolerance, so an image
from the wrong checkpoint cannot pass. The multiplexing hit rate is printed and must beat random
routing's on the same request sequence. The cluster is local (loopback only), small (2 CPUs, no
dashboard, no HTTP proxy, no usage stats) and shut down when the module's tests end. Skipped where
Ray, an optional extra (requirements-cluster.txt), is not installed.
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray.serve")

from personalq.eval.route_bench import replay_hit_rate, zipf_probabilities  # noqa: E402

pytestmark = pytest.mark.slow

DEMO_REPO = Path(__file__).resolve().parents[1] / "assets" / "demo_repo"
CHECKPOINTS = 20
SETTINGS = ("FP32", "W8A8")
REQUESTS = 200
REPLICAS = 2
MODELS_PER_REPLICA = 8
STEPS = 2
CLIENT_THREADS = 2
"""Requests in flight: no more than a replica's limit (2 ongoing), so a key's holder always has room and the
hit rate shows the routing alone; what deeper queues do to it is `personalq bench route`'s subject."""
REQUEST_TIMEOUT_S = 120.0
TOLERANCE = 2
"""Largest allowed per-channel difference (of 255) between a cluster image and its in-process reference."""
DISTINCT = 8.0
"""Smallest mean per-channel difference between references of two checkpoints at one setting."""


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A store home with the first 20 demo checkpoints imported (files and sidecars copied, no previews)."""
    source = tmp_path_factory.mktemp("demo20")
    for weights in sorted(DEMO_REPO.glob("*.safetensors"))[:CHECKPOINTS]:
        shutil.copy(weights, source / weights.name)
        shutil.copy(weights.with_suffix(".yaml"), source / weights.with_suffix(".yaml").name)
    home = tmp_path_factory.mktemp("home")
    from personalq.store import RepoStore

    with RepoStore.open(home) as store:
        store.import_dir(source)
        assert len(store.cards()) == CHECKPOINTS
    return home


@pytest.fixture(scope="module")
def serving(home) -> dict:
    return dict(base_model="pq-nano", device="cpu", dtype="fp32", quantized_dir=str(home / "quantized"),
                calibration_prompts=2, calibration_steps=2)


@pytest.fixture(scope="module")
def store(home):
    from personalq.store import RepoStore

    with RepoStore.open(home) as opened:
        yield opened


def _requests(store):
    """200 requests, checkpoints drawn Zipf(1.1) and settings at random, seeded; one seed per (checkpoint, setting)."""
    from personalq.serving import GenerationRequest

    cards = store.cards()
    rng = np.random.default_rng(27)
    picks = rng.choice(len(cards), size=REQUESTS, p=zipf_probabilities(len(cards), 1.1))
    settings = rng.choice(len(SETTINGS), size=REQUESTS)
    return [GenerationRequest(f"a photo of {cards[c].triggers[0]}", checkpoint_id=cards[c].id, setting=SETTINGS[s],
                              steps=STEPS, seed=int(c), height=None, width=None)
            for c, s in zip(picks.tolist(), settings.tolist())]


def _pixels(image) -> np.ndarray:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


@pytest.fixture(scope="module")
def references(store, serving) -> dict:
    """In-process renders, one per (checkpoint, setting), with one torch thread like each replica."""
    import torch

    from personalq.serving import PipelineManager, ServingConfig

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        manager = PipelineManager(ServingConfig(**serving), store=store)
        wanted = {(r.checkpoint_id, r.setting): r for r in _requests(store)}
        return {key: _pixels(manager.generate(request).image) for key, request in sorted(wanted.items())}
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def cluster(serving, references):
    """A local Ray cluster with the renderer deployed; shut down after the module, whatever happened."""
    import ray
    from ray import serve

    from personalq.cluster.deployment import ReplicaOptions, start

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(num_cpus=REPLICAS, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        start(ReplicaOptions(serving=serving, models_per_replica=MODELS_PER_REPLICA), replicas=REPLICAS)
        yield
    finally:
        serve.shutdown()
        ray.shutdown()


def test_references_of_different_checkpoints_differ(references):
    for setting in SETTINGS:
        images = [image for (_, s), image in references.items() if s == setting]
        for i, a in enumerate(images):
            for b in images[i + 1:]:
                assert np.abs(a - b).mean() > DISTINCT


def test_200_cluster_renders_equal_the_in_process_ones_and_multiplexing_beats_random(cluster, store, references, capsys):
    from personalq.cluster.client import RayRenderer

    renderer = RayRenderer(None, store=store, timeout_s=REQUEST_TIMEOUT_S)
    requests = _requests(store)
    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        results = list(pool.map(renderer.generate, requests))

    wrong = [(r.checkpoint_id, r.setting, int(np.abs(_pixels(result.image) - references[(r.checkpoint_id, r.setting)]).max()))
             for r, result in zip(requests, results)
             if np.abs(_pixels(result.image) - references[(r.checkpoint_id, r.setting)]).max() > TOLERANCE]
    right = len(requests) - len(wrong)
    assert [(r.checkpoint_id, r.setting) for r in requests] == [(x.checkpoint_id, x.setting) for x in results]
    keys = [f"{r.checkpoint_id}@{r.setting}" for r in requests]
    random = float(np.mean([replay_hit_rate(keys, REPLICAS, MODELS_PER_REPLICA, "random", seed) for seed in range(20)]))
    figures = renderer.figures
    with capsys.disabled():
        print(f"\ncluster: {right}/{len(requests)} images right; multiplexing hit rate {figures.hit_rate:.3f} "
              f"({figures.loads} loads, per replica {sorted(figures.by_replica.values())}); "
              f"random routing on the same sequence {random:.3f}")
    assert not wrong, wrong[:5]
    assert figures.requests == REQUESTS and len(figures.by_replica) == REPLICAS
    assert figures.hit_rate > random


def test_unknown_and_broken_checkpoints_are_refused_on_the_cluster_in_one_line(cluster, store):
    from personalq.cluster.client import RayRenderer
    from personalq.serving import GenerationRequest, ServingError

    renderer = RayRenderer(None, store=store, timeout_s=REQUEST_TIMEOUT_S)
    with pytest.raises(ServingError, match="not in the store"):
        renderer.generate(GenerationRequest("a photo", checkpoint_id="no-such-checkpoint", steps=1))
    card = store.cards()[-1]
    store.mark_broken(card.id, "failed earlier")
    try:
        with pytest.raises(ServingError, match="marked broken"):
            renderer.generate(GenerationRequest(f"a photo of {card.triggers[0]}", checkpoint_id=card.id, steps=1))
    finally:
        store.clear_broken(card.id)
