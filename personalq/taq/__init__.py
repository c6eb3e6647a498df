"""TAQ: trigger-aware post-training quantization of diffusers UNets (SD 1.5, SDXL).

Weights are stored low-bit (optimum-quanto on CPU, bitsandbytes on CUDA); activations are rounded to
a-bit grids with calibrated scales, except along the trigger's pathway through cross-attention,
which stays full precision. Protection is chosen per call through `protection_kwargs`.

Names resolve lazily so that `personalq --help` does not import torch and diffusers.
"""

from personalq.lazy import lazy_exports

_EXPORTS = {
    "QuantConfig": "personalq.taq.config",
    "SETTINGS": "personalq.taq.config",
    "TriggerSpan": "personalq.taq.triggers",
    "find_trigger_spans": "personalq.taq.triggers",
    "protection_kwargs": "personalq.taq.triggers",
    "calibration_prompts": "personalq.taq.prompts",
    "held_out_prompts": "personalq.taq.prompts",
    "quantize": "personalq.taq.pipeline",
    "save_quantized": "personalq.taq.pipeline",
    "load_quantized": "personalq.taq.pipeline",
    "resident_weight_bytes": "personalq.taq.weights",
    "unet_bops": "personalq.taq.bops",
    "unet_macs": "personalq.taq.bops",
}

__all__ = [  # noqa: RUF022 - grouped as in _EXPORTS
    "QuantConfig", "SETTINGS", "TriggerSpan", "find_trigger_spans", "protection_kwargs", "calibration_prompts",
    "held_out_prompts", "quantize", "save_quantized", "load_quantized", "resident_weight_bytes", "unet_bops", "unet_macs",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
