"""The bit-width settings a user picks (FP32, BF16, W8A8, ...): one type, one registry, one refusal.

TAQ's config, serving, the service, the CLI and the UI all name a setting by its string and resolve it
here, so a setting a device cannot run is refused up front, in one line, before any model is touched
(W2A8 used to fail deep inside the quantizer; FP16 on CPU used to run silently as FP32).

Kept free of torch imports so that `personalq --help` stays fast; device checks import it lazily.
"""

from __future__ import annotations

from dataclasses import dataclass

from personalq.errors import PersonalQError

DEVICE_TYPES = ("cpu", "cuda")


class SettingError(PersonalQError, ValueError):
    """A setting that does not exist or that this device cannot run; the message is the one-line reason."""


@dataclass(frozen=True)
class Setting:
    """One bit-width setting.

    `w_bits`/`a_bits` of 16 or 32 mean float tensors (no quantization). `dtype` names the float dtype
    the setting runs in (a torch dtype name); quantized settings run their float parts (the shared text
    encoder and VAE, protected tokens) in the server's own float dtype, so theirs is None.
    `devices` are the device types whose kernels can run it.
    """

    name: str
    w_bits: int
    a_bits: int
    dtype: str | None
    devices: tuple[str, ...]

    @property
    def quantized(self) -> bool:
        return self.w_bits <= 8 or self.a_bits <= 8

    def refusal(self, device: str) -> str | None:
        """Why `device` ("cpu", "cuda", "cuda:1") cannot run this setting, or None when it can."""
        kind = str(device).split(":")[0]
        if kind not in self.devices:
            return f"setting {self.name} does not run on {kind}; on {kind} choose one of {', '.join(names_for(kind))}"
        if kind == "cpu" and self.dtype in ("bfloat16", "float16") and not _cpu_supports(self.dtype):
            return f"setting {self.name} needs a CPU with {self.dtype} instructions (oneDNN reports none here); choose FP32"
        return None


def _cpu_supports(dtype: str) -> bool:
    import torch

    check = {"bfloat16": torch.ops.mkldnn._is_mkldnn_bf16_supported, "float16": torch.ops.mkldnn._is_mkldnn_fp16_supported}[dtype]
    return bool(check())


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting("FP32", 32, 32, "float32", DEVICE_TYPES),
        Setting("FP16", 16, 16, "float16", DEVICE_TYPES),
        Setting("BF16", 16, 16, "bfloat16", DEVICE_TYPES),
        Setting("W8A8", 8, 8, None, DEVICE_TYPES),
        Setting("W4A8", 4, 8, None, DEVICE_TYPES),
        Setting("W8A4", 8, 4, None, DEVICE_TYPES),
        Setting("W4A4", 4, 4, None, DEVICE_TYPES),
    )
}
"""Every setting the product offers, full precision first."""

FLOAT_DTYPE_SETTINGS = {"float32": "FP32", "float16": "FP16", "bfloat16": "BF16"}
"""Torch dtype name -> the full-precision setting that runs in it."""


def names_for(device: str) -> list[str]:
    """The settings `device` can run, in registry order (without the hardware check, which is per setting)."""
    kind = str(device).split(":")[0]
    return [name for name, s in SETTINGS.items() if kind in s.devices]


def get_setting(name: str, device: str | None = None) -> Setting:
    """The setting called `name` (case-insensitive); SettingError when unknown or when `device` cannot run it."""
    setting = SETTINGS.get(str(name).strip().upper())
    if setting is None:
        raise SettingError(f"unknown setting {name!r}; choose one of {', '.join(SETTINGS)}")
    reason = None if device is None else setting.refusal(device)
    if reason is not None:
        raise SettingError(reason)
    return setting


def quantized_names() -> list[str]:
    return [name for name, s in SETTINGS.items() if s.quantized]
