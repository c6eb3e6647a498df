"""`QuantConfig`: what a TAQ quantization does, and the bit-width settings as the UI names them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from personalq.setting import SETTINGS as _REGISTRY
from personalq.setting import get_setting

SETTINGS = {name: (s.w_bits, s.a_bits) for name, s in _REGISTRY.items() if s.dtype != "bfloat16"}
"""Setting name -> (weight bits, activation bits) of the registry's settings TAQ produces (`personalq.setting`).
BF16 is left out: it is a float dtype the pipeline is loaded in, and TAQ's 16 bits mean float16."""

PROTECT_MODES = ("trigger", "bos", "trigger+bos", "none")
WEIGHT_BITS = (2, 4, 8, 16, 32)  # the low-bit types optimum-quanto stores (qint2/4/8), or float
QUANTIZERS = ("linear", "log")
CALIBRATIONS = ("static", "dynamic")


@dataclass(frozen=True)
class QuantConfig:
    """Bits of weights and activations, the quantizer of attention probabilities, what to protect.

    `quantizer` picks the grid of the cross-attention probabilities A ("log" suits softmax); every
    other activation uses the affine grid. `protect` names what stays full precision in the
    cross-attention: the trigger span, the start token (BOS), both, or nothing (plain PTQ).
    `calibration="static"` stores activation ranges collected over calibration prompts and
    timesteps; "dynamic" measures them on every call. `clip_percentile` below 100 clips static ranges to
    that percentile of the unprotected entries (averaged over calibration calls) instead of min/max.
    `timestep_groups` > 1 keeps one static range per group of denoising timesteps (TDQ / Q-Diffusion-style:
    activation ranges drift with the timestep). `smooth_alpha` > 0 migrates activation outliers into the
    weights before quantizing (SmoothQuant): input channel j of a Linear is divided by
    s_j = max|x_j|^alpha / max|w_j|^(1 - alpha) and its weight column multiplied by it.
    """

    w_bits: int = 8
    a_bits: int = 8
    quantizer: str = "linear"
    protect: str = "trigger"
    calibration: str = "static"
    clip_percentile: float = 100.0
    timestep_groups: int = 1
    smooth_alpha: float = 0.0

    def __post_init__(self):
        if self.w_bits not in WEIGHT_BITS:
            raise ValueError(f"w_bits={self.w_bits} is not supported: choose one of {WEIGHT_BITS}")
        if not (2 <= self.a_bits <= 8 or self.a_bits in (16, 32)):
            raise ValueError(f"a_bits={self.a_bits} is not supported: choose 2..8, or 16/32 for float")
        if self.quantizer not in QUANTIZERS:
            raise ValueError(f"quantizer={self.quantizer!r} is not supported: choose one of {QUANTIZERS}")
        if self.protect not in PROTECT_MODES:
            raise ValueError(f"protect={self.protect!r} is not supported: choose one of {PROTECT_MODES}")
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration={self.calibration!r} is not supported: choose one of {CALIBRATIONS}")
        if not 1 <= self.timestep_groups <= 1000:
            raise ValueError(f"timestep_groups={self.timestep_groups} must be 1..1000")
        if self.timestep_groups > 1 and self.calibration != "static":
            raise ValueError("timestep_groups > 1 needs calibration='static': dynamic ranges are measured per call anyway")
        if not 0.0 <= self.smooth_alpha < 1.0:
            raise ValueError(f"smooth_alpha={self.smooth_alpha} must be in [0, 1): 0 turns smoothing off")

    @classmethod
    def from_setting(cls, name: str, **kwargs) -> QuantConfig:
        """`QuantConfig.from_setting("W8A8", protect="trigger")`; SettingError (a ValueError) for unknown names."""
        setting = get_setting(name)
        if setting.name not in SETTINGS:
            raise ValueError(f"{setting.name} is not a TAQ quantization: load the pipeline in {setting.dtype} instead")
        return cls(w_bits=setting.w_bits, a_bits=setting.a_bits, **kwargs)

    @property
    def name(self) -> str:
        if self.w_bits >= 16 and self.a_bits >= 16:
            return f"FP{self.w_bits}"
        return f"W{self.w_bits}A{self.a_bits}"

    @property
    def quantizes_weights(self) -> bool:
        return self.w_bits <= 8

    @property
    def quantizes_activations(self) -> bool:
        return self.a_bits <= 8

    @property
    def protects_trigger(self) -> bool:
        return "trigger" in self.protect

    @property
    def protects_bos(self) -> bool:
        return "bos" in self.protect

    @property
    def needs_reference_path(self) -> bool:
        """Timestep-switched ranges and smoothing hooks run on the fake-quantized layers, not the int8 kernels
        (which pack one input grid per layer and replace the hooked layer objects)."""
        return self.timestep_groups > 1 or self.smooth_alpha > 0

    def to_dict(self) -> dict:
        return asdict(self)
