"""Serving: one resident base model, many personalized checkpoints, any bit-width, one queue.

    manager = PipelineManager(ServingConfig(base_model="pq-nano"), store=store)
    result = manager.generate(GenerationRequest("a <bear-v4> in snow", checkpoint_id="bear-v4", setting="W8A8"))
    queue = RequestQueue(manager); handle = queue.submit(request); handle.result(timeout=60)
"""

from personalq.lazy import lazy_exports

_EXPORTS = {
    "ServingConfig": "personalq.serving.config",
    "PipelineManager": "personalq.serving.manager",
    "QueueFull": "personalq.serving.queue",
    "RequestHandle": "personalq.serving.queue",
    "RequestQueue": "personalq.serving.queue",
    "GenerationRequest": "personalq.serving.requests",
    "GenerationResult": "personalq.serving.requests",
    "RequestCancelled": "personalq.serving.requests",
    "ServingError": "personalq.serving.requests",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
