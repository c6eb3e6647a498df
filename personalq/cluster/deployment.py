"""Rendering as a Ray Serve deployment: replicas of one PipelineManager each, multiplexed by (checkpoint, setting).

Each replica is today's single-machine renderer: a PipelineManager holding a byte budget of checkpoint
variants. Ray Serve's model multiplexing routes a request for a (checkpoint, setting) key to a replica
that already served that key, so a checkpoint is loaded on few replicas instead of all of them.

Ray's multiplexing keeps its own LRU of keys per replica, bounded by a count
(`max_num_models_per_replica`), and uses it only to route; the bytes stay where they are today, in the
manager's cache, bounded by `memory_budget_bytes`. Set the count to roughly how many variants the
budget holds, so the two agree. The multiplexed loader is called exactly when a replica is sent a key
it does not hold, so each replica counts its own misses and reports them with every image.

Replicas never open the catalog: the caller resolves the checkpoint's card (and whether it is marked
broken) in its own store and sends it with the request; the checkpoint's file is read from the path on
the card, which every replica must see (one machine, or a shared file system). A checkpoint that fails
to load comes back marked broken, and the caller records that in its store.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

from ray import serve

from personalq.cluster.jobs import ForwardedCards, RenderJob, RenderOutcome
from personalq.serving.requests import ServingError

APP_NAME = "personalq"
DEPLOYMENT_NAME = "Renderer"
MAX_ONGOING_REQUESTS = 2
"""Per replica, below Ray's default of 5: a manager renders one request at a time, so a deeper queue only
makes requests wait behind a popular checkpoint's holder before the router looks elsewhere
(`personalq bench route --max-ongoing 2` vs `5`, BENCHMARKS.md "Beyond one machine")."""


@dataclass(frozen=True)
class ReplicaOptions:
    """How each replica is built: its ServingConfig fields, how many keys Ray keeps for routing, its torch threads."""

    serving: dict = field(default_factory=dict)
    models_per_replica: int = 8
    torch_threads: int | None = 1


class Renderer:
    """One replica. Requests for a key it holds skip the loader; the render runs on a worker thread."""

    def __init__(self, options: ReplicaOptions):
        import torch

        from personalq.serving import PipelineManager, ServingConfig

        if options.torch_threads:
            torch.set_num_threads(options.torch_threads)
        self.name = f"{os.uname().nodename}:{os.getpid()}"
        self.cards = ForwardedCards()
        self.manager = PipelineManager(ServingConfig(**options.serving), store=self.cards)
        self._fresh: set[str] = set()

    async def load_variant(self, key: str) -> str:
        """The multiplexed loader (wrapped per replica in `build_app`): called only on a miss for `key`.

        The manager loads the checkpoint into its byte-budgeted cache on the first render; this only
        records the miss, so the figures count exactly the loads Ray's routing caused.
        """
        self._fresh.add(key)
        return key

    async def __call__(self, job: RenderJob) -> RenderOutcome:
        key = serve.get_multiplexed_model_id()
        await self.load_variant(key)
        loaded = key in self._fresh
        self._fresh.discard(key)
        outcome = RenderOutcome(replica=self.name, loaded=loaded)
        await asyncio.to_thread(self._render, job, outcome)
        return outcome

    def _render(self, job: RenderJob, outcome: RenderOutcome) -> None:
        with self.cards.serving(job) as cards:
            try:
                outcome.result = self.manager.generate(job.request)
            except ServingError as error:
                outcome.error, outcome.broken = str(error), cards.marked


def build_app(options: ReplicaOptions, replicas: int, replica_cpus: float = 1.0, max_ongoing: int = MAX_ONGOING_REQUESTS):
    """The Serve application: `replicas` Renderers, each with its own multiplexed key LRU."""
    cls = type(DEPLOYMENT_NAME, (Renderer,), {
        "load_variant": serve.multiplexed(max_num_models_per_replica=options.models_per_replica)(Renderer.load_variant),
    })
    deployment = serve.deployment(cls, name=DEPLOYMENT_NAME, num_replicas=replicas, max_ongoing_requests=max_ongoing,
                                  ray_actor_options={"num_cpus": replica_cpus})
    return deployment.bind(options)


def connect(address: str | None) -> None:
    """Join the cluster at `address` ("auto", "ray://host:10001", ...), or start a local one when None."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)


def start(options: ReplicaOptions, replicas: int, address: str | None = None, replica_cpus: float = 1.0):
    """Deploy the renderers on the cluster (no HTTP proxy: callers use the deployment handle); the handle."""
    connect(address)
    serve.start(proxy_location="Disabled")
    return serve.run(build_app(options, replicas, replica_cpus), name=APP_NAME, route_prefix=None)
