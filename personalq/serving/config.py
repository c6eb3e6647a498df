"""What a serving process is configured with, and the device/dtype it settles on.

One `ServingConfig` describes one resident base model; everything request-specific lives in
`GenerationRequest`, so a single manager can serve every checkpoint and bit-width of its base.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from personalq.setting import FLOAT_DTYPE_SETTINGS, get_setting

DEFAULT_BASE_MODEL = "pq-nano"


@dataclass
class ServingConfig:
    """How to load the shared base model and how much memory the resident cache may hold.

    `base_model` is "pq-nano" (the shipped default), a hub id, a local diffusers folder, or a
    single-file `.safetensors`/`.ckpt` checkpoint. Single files carry no configs, so
    `single_file_config` names a local diffusers folder (or cached hub id) to take them from.
    `memory_budget_bytes` bounds the cache of resident models and adapters (None: unbounded).
    Quantized variants are calibrated once over `calibration_prompts` prompts at
    `calibration_steps` steps, then saved (base variants under `quantized_dir`, default
    `$PERSONALQ_HOME/quantized/`; a full checkpoint's beside its file) and loaded from there after.
    """

    base_model: str = DEFAULT_BASE_MODEL
    device: str | None = None
    dtype: str | torch.dtype | None = None
    memory_budget_bytes: int | None = None
    single_file_config: str | Path | None = None
    quantized_dir: str | Path | None = None
    calibration_prompts: int = 16
    calibration_steps: int = 10


_DTYPES = {
    "fp32": torch.float32,
    "float32": torch.float32,
    "fp16": torch.float16,
    "float16": torch.float16,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
}


def resolve_device_dtype(device: str | None, dtype: str | torch.dtype | None) -> tuple[torch.device, torch.dtype]:
    """CUDA with fp16 when present, else CPU with fp32; a dtype the device cannot run is refused here.

    CPU fp32 is the default because bf16/fp16 are fast only where oneDNN finds the instructions
    (BENCHMARKS.md measures them); asking for them on a CPU without is refused, never run as fp32.
    """
    resolved_device = torch.device(device) if device else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dtype is None:
        resolved = torch.float16 if resolved_device.type == "cuda" else torch.float32
    elif isinstance(dtype, torch.dtype):
        resolved = dtype
    else:
        try:
            resolved = _DTYPES[str(dtype).lower()]
        except KeyError:
            raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(set(_DTYPES))}") from None
    name = str(resolved).removeprefix("torch.")
    if name not in FLOAT_DTYPE_SETTINGS:
        raise ValueError(f"dtype {name} is not a float dtype a pipeline runs in; use fp32, fp16 or bf16")
    get_setting(FLOAT_DTYPE_SETTINGS[name], resolved_device.type)  # SettingError (a ValueError) when it cannot run
    return resolved_device, resolved
