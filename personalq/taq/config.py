"""`QuantConfig`: what a TAQ quantization does, and the bit-width settings as the UI names them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

SETTINGS = {
    "FP32": (32, 32),
    "FP16": (16, 16),
    "W8A8": (8, 8),
    "W4A8": (4, 8),
    "W8A4": (8, 4),
    "W4A4": (4, 4),
}
"""Setting name -> (weight bits, activation bits). 32/16 mean float tensors, no quantization."""

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
    timesteps; "dynamic" measures them on every call.
    """

    w_bits: int = 8
    a_bits: int = 8
    quantizer: str = "linear"
    protect: str = "trigger"
    calibration: str = "static"

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

    @classmethod
    def from_setting(cls, name: str, **kwargs) -> QuantConfig:
        """`QuantConfig.from_setting("W8A8", protect="trigger")`; names as in `SETTINGS`."""
        key = name.strip().upper()
        if key not in SETTINGS:
            raise ValueError(f"unknown setting {name!r}: choose one of {', '.join(SETTINGS)}")
        w_bits, a_bits = SETTINGS[key]
        return cls(w_bits=w_bits, a_bits=a_bits, **kwargs)

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

    def to_dict(self) -> dict:
        return asdict(self)
