"""The whole stack on loopback: catalog on PostgreSQL, dense index on a Chroma server, renders on a 2-replica Ray cluster.

Started here, on 127.0.0.1 only: a PostgreSQL server (`PERSONALQ_DATABASE_URL`), a `chroma run` server
(`PERSONALQ_CHROMA_URL`) and a local Ray cluster (2 CPUs, no dashboard, no HTTP proxy, no usage stats)
with the renderer deployed on 2 replicas; all are stopped when the module's tests end. The whole demo
repository is imported through a store on those servers; Check-in selects through them; then 200
requests over 20 of its checkpoints at two settings go to the cluster.

Every image must equal, within a stated tolerance, the in-process render of the same (checkpoint,
setting, seed); the references of different checkpoints differ far beyond that tolerance, so an image
from the wrong checkpoint cannot pass. The multiplexing hit rate is printed and must beat random
routing's on the same request sequence. Skipped (with the reason) where Ray or psycopg, optional
extras (requirements-cluster.txt), Debian's `postgresql` or chromadb's `chroma` command is missing.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray.serve")
pytest.importorskip("psycopg")

from loopback import chroma_collection, chroma_server, postgresql_server  # noqa: E402

from personalq.eval.route_bench import replay_hit_rate, zipf_probabilities  # noqa: E402

pytestmark = pytest.mark.slow

DEMO_REPO = Path(__file__).resolve().parents[1] / "assets" / "demo_repo"
DEMO_CHECKPOINTS = 60
CHECKPOINTS = 20
"""Requests go to the first 20 demo checkpoints by id: three versions of most subjects, so a wrong
version of the right subject would be caught too."""
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
CHECKIN_REQUESTS = {"my green bag": "bag-v1", "the white bear under the night sky": "bear-v2",
                    "my bridge at sunset": "bridge-v2"}
"""Requests Check-in must resolve to one checkpoint through the servers (descriptions, styles, scenes)."""


@pytest.fixture(scope="module")
def servers():
    """PostgreSQL and Chroma servers, named to the store by the variables a deployment sets."""
    with postgresql_server() as database_url, chroma_server() as chroma_url, pytest.MonkeyPatch.context() as env:
        env.setenv("PERSONALQ_DATABASE_URL", database_url)
        env.setenv("PERSONALQ_CHROMA_URL", chroma_url)
        yield database_url, chroma_url


@pytest.fixture(scope="module")
def store(servers, tmp_path_factory):
    """A store on both servers with the whole demo repository imported (files, sidecars and previews)."""
    from personalq.store import RepoStore

    with RepoStore.open(tmp_path_factory.mktemp("home")) as opened:
        report = opened.import_dir(DEMO_REPO)
        assert len(report.added) == DEMO_CHECKPOINTS and not report.refused and not report.skipped
        yield opened


@pytest.fixture(scope="module")
def served(store) -> list:
    """The 20 checkpoints the requests go to."""
    return sorted(store.cards(), key=lambda card: card.id)[:CHECKPOINTS]


@pytest.fixture(scope="module")
def serving(store) -> dict:
    return dict(base_model="pq-nano", device="cpu", dtype="fp32", quantized_dir=str(store.home / "quantized"),
                calibration_prompts=2, calibration_steps=2)


def _requests(cards: list) -> list:
    """200 requests, checkpoints drawn Zipf(1.1) and settings at random, seeded; one seed per checkpoint."""
    from personalq.serving import GenerationRequest

    rng = np.random.default_rng(27)
    picks = rng.choice(len(cards), size=REQUESTS, p=zipf_probabilities(len(cards), 1.1))
    settings = rng.choice(len(SETTINGS), size=REQUESTS)
    return [GenerationRequest(f"a photo of {cards[c].triggers[0]}", checkpoint_id=cards[c].id, setting=SETTINGS[s],
                              steps=STEPS, seed=int(c), height=None, width=None)
            for c, s in zip(picks.tolist(), settings.tolist())]


def _pixels(image) -> np.ndarray:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


@pytest.fixture(scope="module")
def in_process(store, serving, one_torch_thread):
    """Today's single-machine renderer on the same store, with one torch thread like each replica."""
    from personalq.serving import PipelineManager, ServingConfig

    return PipelineManager(ServingConfig(**serving), store=store)


@pytest.fixture(scope="module")
def references(served, in_process) -> dict:
    """In-process renders, one per (checkpoint, setting) the requests ask for."""
    wanted = {(r.checkpoint_id, r.setting): r for r in _requests(served)}
    return {key: _pixels(in_process.generate(request).image) for key, request in sorted(wanted.items())}


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


def _differs(image, reference) -> int:
    """Largest per-channel difference (of 255) between two renders."""
    return int(np.abs(_pixels(image) - reference).max())


def test_the_catalog_is_on_postgresql_and_every_vector_on_the_chroma_server(servers, store):
    from personalq.store.indexes import SERVER_COLLECTION_FILE

    database_url, chroma_url = servers
    ids = sorted(card.id for card in store.cards())
    assert store.database_url == database_url and len(ids) == DEMO_CHECKPOINTS
    assert not list(store.home.glob("*.db"))  # no SQLite catalog beside the files
    assert sorted(p.name for p in (store.home / "chroma").iterdir()) == [SERVER_COLLECTION_FILE]  # no embedded Chroma
    with chroma_collection(chroma_url, store.home) as collection:
        assert sorted(collection.get()["ids"]) == ids
    assert [store.dense_search(card.description, 1)[0][0] for card in store.cards()] == [card.id for card in store.cards()]


def test_references_of_different_checkpoints_differ(references):
    for setting in SETTINGS:
        images = [image for (_, s), image in references.items() if s == setting]
        for i, a in enumerate(images):
            for b in images[i + 1:]:
                assert np.abs(a - b).mean() > DISTINCT


def test_200_cluster_renders_equal_the_in_process_ones_and_multiplexing_beats_random(cluster, store, served, references, capsys):
    from personalq.cluster.client import RayRenderer

    renderer = RayRenderer(None, store=store, timeout_s=REQUEST_TIMEOUT_S)
    requests = _requests(served)
    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        results = list(pool.map(renderer.generate, requests))

    differences = [(r.checkpoint_id, r.setting, _differs(result.image, references[(r.checkpoint_id, r.setting)]))
                   for r, result in zip(requests, results)]
    wrong = [difference for difference in differences if difference[2] > TOLERANCE]
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


def test_check_in_selects_through_the_servers_and_the_cluster_renders_its_choice(cluster, store, served, in_process):
    from personalq.checkin import CheckIn
    from personalq.cluster.client import RayRenderer
    from personalq.serving import GenerationRequest

    renderer = RayRenderer(None, store=store, timeout_s=REQUEST_TIMEOUT_S)
    checkin = CheckIn(store)
    for text, expected in CHECKIN_REQUESTS.items():
        result = checkin.ask(text)
        assert (result.action, result.checkpoint_id) == ("select", expected), (text, result.reason)
        request = GenerationRequest(result.rewritten_prompt, checkpoint_id=expected, setting=SETTINGS[-1], steps=STEPS,
                                    seed=0, height=None, width=None)
        assert _differs(renderer.generate(request).image, _pixels(in_process.generate(request).image)) <= TOLERANCE, text


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
