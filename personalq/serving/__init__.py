"""Serving: one resident base model, many personalized checkpoints, any bit-width, one queue.

    manager = PipelineManager(ServingConfig(base_model="pq-nano"), store=store)
    result = manager.generate(GenerationRequest("a <bear-v4> in snow", checkpoint_id="bear-v4", setting="W8A8"))
    queue = RequestQueue(manager); handle = queue.submit(request); handle.result(timeout=60)
"""

from personalq.serving.config import ServingConfig
from personalq.serving.manager import PipelineManager
from personalq.serving.queue import QueueFull, RequestHandle, RequestQueue
from personalq.serving.requests import (
    GenerationRequest,
    GenerationResult,
    RequestCancelled,
    ServingError,
)

__all__ = [
    "GenerationRequest",
    "GenerationResult",
    "PipelineManager",
    "QueueFull",
    "RequestCancelled",
    "RequestHandle",
    "RequestQueue",
    "ServingConfig",
    "ServingError",
]
