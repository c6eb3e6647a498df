"""Cluster rendering without a cluster: nothing changes when no variable is set, and the client's bookkeeping.

The replica-side store shim and the client's handling of what a replica returns are tested against a
stand-in deployment handle, so these run in milliseconds; tests/test_cluster_loopback.py runs the real thing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from personalq.cluster.jobs import ForwardedCards, RenderJob, RenderOutcome, variant_key
from personalq.serving import GenerationRequest, GenerationResult, RequestCancelled, ServingError

ROOT = Path(__file__).resolve().parents[1]


def test_without_the_variable_the_library_renders_in_process_and_never_imports_ray():
    code = (
        "import sys\n"
        "import personalq.cli\n"  # every command registered, `serve` and `bench route` included
        "from personalq.cluster.client import renderer_for\n"
        "from personalq.serving import PipelineManager, ServingConfig\n"
        "renderer = renderer_for(ServingConfig(device='cpu'))\n"
        "assert type(renderer) is PipelineManager, type(renderer)\n"
        "assert not [m for m in sys.modules if m == 'ray' or m.startswith('ray.')], 'ray was imported'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PERSONALQ_RAY_ADDRESS"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("value, expected", [(None, None), ("", None), ("  ", None), ("auto", "auto"), (" ray://h:10001 ", "ray://h:10001")])
def test_ray_address_reads_the_variable(monkeypatch, value, expected):
    from personalq.cluster.client import ray_address

    if value is None:
        monkeypatch.delenv("PERSONALQ_RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("PERSONALQ_RAY_ADDRESS", value)
    assert ray_address() == expected


def test_variant_keys_separate_checkpoints_and_settings():
    keys = {variant_key(c, s) for c in (None, "bear-v1", "bear-v2") for s in ("FP32", "W8A8")}
    assert len(keys) == 6


@dataclass
class Card:
    id: str


def test_forwarded_cards_answer_only_for_the_card_being_served():
    cards = ForwardedCards()
    with pytest.raises(KeyError):
        cards.get("bear-v1")
    with cards.serving(RenderJob(GenerationRequest("p"), Card("bear-v1"), "bad header")) as serving:
        assert serving.get("bear-v1").id == "bear-v1"
        with pytest.raises(KeyError):
            serving.get("bear-v2")
        assert serving.broken() == {"bear-v1": "bad header"}
        serving.mark_broken("bear-v1", "cannot load lora")
        assert serving.marked == "cannot load lora"
    with pytest.raises(KeyError):
        cards.get("bear-v1")
    assert cards.broken() == {}
    with cards.serving(RenderJob(GenerationRequest("p"), Card("bear-v2"))):
        assert cards.marked is None and cards.broken() == {}


class FakeStore:
    """The store calls RayRenderer makes: get, broken, mark_used, mark_broken."""

    def __init__(self, ids, broken=None):
        self.cards = {i: Card(i) for i in ids}
        self.marked_broken: dict[str, str] = dict(broken or {})
        self.used: list[str] = []

    def get(self, checkpoint_id):
        return self.cards[checkpoint_id]

    def broken(self):
        return dict(self.marked_broken)

    def mark_used(self, checkpoint_id):
        self.used.append(checkpoint_id)

    def mark_broken(self, checkpoint_id, reason):
        self.marked_broken[checkpoint_id] = reason


class FakeResponse:
    def __init__(self, outcome=None, never=False):
        self.outcome, self.never, self.cancelled = outcome, never, False

    def result(self, timeout_s=None):
        if self.never:
            raise TimeoutError
        return self.outcome

    def cancel(self):
        self.cancelled = True


class FakeHandle:
    """Stands in for a DeploymentHandle: records the multiplexed id and job of each call."""

    def __init__(self, answer):
        self.answer, self.calls, self._model_id = answer, [], None

    def options(self, multiplexed_model_id):
        self._model_id = multiplexed_model_id
        return self

    def remote(self, job):
        self.calls.append((self._model_id, job))
        return self.answer(job)


def _result(job):
    return GenerationResult(image=None, seconds=0.1, setting=job.request.setting, resident_bytes=1,
                            checkpoint_id=job.request.checkpoint_id, seed=job.request.seed)


def _renderer(store, answer, **kwargs):
    pytest.importorskip("ray")  # the client waits with Ray's timeout error type
    from personalq.cluster.client import RayRenderer

    return RayRenderer(None, store=store, handle=FakeHandle(answer), **kwargs)


def test_client_sends_the_card_keyed_by_variant_and_counts_loads():
    store = FakeStore(["bear-v1"], broken={})
    loaded = iter([True, False])
    renderer = _renderer(store, lambda job: FakeResponse(RenderOutcome("r1", next(loaded), result=_result(job))))
    for _ in range(2):
        renderer.generate(GenerationRequest("a <bear-v1>", checkpoint_id="bear-v1", setting="W8A8"))
    (key, job), _ = renderer._handle.calls
    assert key == "bear-v1@W8A8" and job.card.id == "bear-v1" and job.broken_reason is None
    assert store.used == ["bear-v1", "bear-v1"]
    assert (renderer.figures.requests, renderer.figures.loads, renderer.figures.hit_rate) == (2, 1, 0.5)


def test_client_forwards_a_broken_mark_and_records_one_the_replica_makes():
    store = FakeStore(["bear-v1", "kite-v1"], broken={"bear-v1": "bad"})
    renderer = _renderer(store, lambda job: FakeResponse(RenderOutcome(
        "r1", True, error=f"checkpoint {job.card.id}: cannot load lora (marked broken)", broken="cannot load lora")))
    with pytest.raises(ServingError, match="cannot load lora"):
        renderer.generate(GenerationRequest("a <bear-v1>", checkpoint_id="bear-v1"))
    assert renderer._handle.calls[0][1].broken_reason == "bad"
    with pytest.raises(ServingError):
        renderer.generate(GenerationRequest("a <kite-v1>", checkpoint_id="kite-v1"))
    assert store.marked_broken["kite-v1"] == "cannot load lora" and store.used == []


def test_client_sends_no_card_for_an_unknown_checkpoint_and_the_replicas_refusal_is_raised():
    store = FakeStore([])
    renderer = _renderer(store, lambda job: FakeResponse(RenderOutcome("r1", True, error="checkpoint x: not in the store")))
    with pytest.raises(ServingError, match="not in the store"):
        renderer.generate(GenerationRequest("p", checkpoint_id="x"))
    assert renderer._handle.calls[0][1].card is None


def test_client_cancels_a_render_that_is_cancelled_or_too_slow():
    cancel = threading.Event()
    responses = []

    def hang(job):
        responses.append(FakeResponse(never=True))
        return responses[-1]

    with pytest.raises(ServingError, match="did not answer"):
        _renderer(FakeStore([]), hang, timeout_s=0.3).generate(GenerationRequest("p"))
    renderer = _renderer(FakeStore([]), hang, timeout_s=60)
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(RequestCancelled):
        renderer.generate(GenerationRequest("p"), cancel=cancel)
    assert [r.cancelled for r in responses] == [True, True]
    cancel.set()
    with pytest.raises(RequestCancelled, match="before it started"):
        renderer.generate(GenerationRequest("p"), cancel=cancel)
    assert len(responses) == 2


def test_serve_without_ray_says_what_to_run_instead():
    from typer.testing import CliRunner

    from personalq.cli import app

    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 2 and "python app.py" in result.output
