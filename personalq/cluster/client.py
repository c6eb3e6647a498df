"""The library's side of cluster rendering: a renderer with PipelineManager's `generate`, backed by Ray Serve.

`renderer_for(config, store)` is the one switch: with `PERSONALQ_RAY_ADDRESS` set it returns a
`RayRenderer` talking to the deployment started by `personalq serve --ray`; otherwise it returns
today's in-process PipelineManager, and Ray is never imported. Both fit `RequestQueue`, so the app's
queue, fairness and cancellation work the same either way.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from personalq.serving.requests import (
    GenerationRequest,
    ProgressCallback,
    RequestCancelled,
    ServingError,
)

RAY_ADDRESS_ENV = "PERSONALQ_RAY_ADDRESS"
POLL_S = 0.2


def ray_address() -> str | None:
    """The cluster address the environment names, or None for in-process rendering."""
    return os.environ.get(RAY_ADDRESS_ENV, "").strip() or None


def renderer_for(config=None, store=None):
    """A RayRenderer when PERSONALQ_RAY_ADDRESS is set, else an in-process PipelineManager (as today)."""
    address = ray_address()
    if address is None:
        from personalq.serving import PipelineManager

        return PipelineManager(config, store=store)
    return RayRenderer(address, store=store)


@dataclass
class RoutingFigures:
    """What this client saw of multiplexing: requests sent, how many made a replica load, per replica."""

    requests: int = 0
    loads: int = 0
    by_replica: dict[str, int] = field(default_factory=dict)

    @property
    def hit_rate(self) -> float:
        return 1.0 - self.loads / self.requests if self.requests else 0.0


class RayRenderer:
    """Renders through the `personalq` Serve application; the checkpoint's card goes with each request.

    The card and its broken mark are read from this process's store (the catalog stays in one place),
    and what the replica reports back (used, broken) is written there, as PipelineManager does in-process.
    """

    def __init__(self, address: str | None, store=None, handle=None, timeout_s: float = 600.0):
        if handle is None:
            from ray import serve

            from personalq.cluster.deployment import APP_NAME, connect

            connect(address)
            try:
                handle = serve.get_app_handle(APP_NAME)
            except Exception as error:  # noqa: BLE001 (Ray raises several types; the user needs the one line)
                raise ServingError(f"no PersonalQ deployment on the Ray cluster at {address}: start one with "
                                   f"`personalq serve --ray` ({type(error).__name__})") from None
        self._handle = handle
        self._store = store
        self.timeout_s = timeout_s
        self.figures = RoutingFigures()
        self._lock = threading.Lock()

    def generate(self, request: GenerationRequest, progress: ProgressCallback | None = None,
                 cancel: threading.Event | None = None):
        from personalq.cluster.jobs import RenderJob, variant_key

        if cancel is not None and cancel.is_set():
            raise RequestCancelled("cancelled before it started")
        job = RenderJob(request, *self._card(request.checkpoint_id))
        if progress:
            progress(0, 1, "rendering on the cluster")
        response = self._handle.options(multiplexed_model_id=variant_key(request.checkpoint_id, request.setting)).remote(job)
        outcome = self._wait(response, cancel)
        self._record(outcome)
        if outcome.error is not None:
            if outcome.broken and hasattr(self._store, "mark_broken"):
                self._store.mark_broken(request.checkpoint_id, outcome.broken)
            raise ServingError(outcome.error)
        if request.checkpoint_id and hasattr(self._store, "mark_used"):
            self._store.mark_used(request.checkpoint_id)
        if progress:
            progress(1, 1, "rendered")
        return outcome.result

    def _card(self, checkpoint_id: str | None) -> tuple[object, str | None]:
        """(card or None, broken reason or None); a missing card goes as None and the replica refuses it."""
        if not checkpoint_id or self._store is None:
            return None, None
        try:
            card = self._store.get(checkpoint_id)
        except KeyError:
            return None, None
        broken = getattr(self._store, "broken", None)
        return card, (broken() if callable(broken) else {}).get(card.id)

    def _wait(self, response, cancel: threading.Event | None):
        from ray.exceptions import GetTimeoutError

        deadline = time.monotonic() + self.timeout_s
        while True:
            if cancel is not None and cancel.is_set():
                response.cancel()
                raise RequestCancelled("cancelled while rendering on the cluster")
            try:
                return response.result(timeout_s=POLL_S)
            except (GetTimeoutError, TimeoutError):
                if time.monotonic() > deadline:
                    response.cancel()
                    raise ServingError(f"the cluster did not answer within {self.timeout_s:g} s") from None

    def _record(self, outcome) -> None:
        with self._lock:
            self.figures.requests += 1
            self.figures.loads += int(outcome.loaded)
            self.figures.by_replica[outcome.replica] = self.figures.by_replica.get(outcome.replica, 0) + 1
