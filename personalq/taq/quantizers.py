"""Uniform affine and logarithmic fake quantizers, and the calibrated activation quantizer.

Weights are stored low-bit by optimum-quanto / bitsandbytes (see `weights.py`); activations only
exist during a call, so they are rounded onto the a-bit grid in place ("fake" quantization), which is
exactly what an integer kernel would see. Every function takes `lo`/`hi` as tensors or floats that
broadcast against `x`, so the same code gives per-tensor, per-channel and per-row scales.
"""

from __future__ import annotations

import warnings

import torch

REUSE_MAX_ELEMENTS = 1 << 18
"""Inputs up to this size keep their last result for reuse: the text entering cross-attention and its
K/V are the same tensors at every denoising step, while larger activations change every call and would
only be held in memory for nothing."""

QUANTILE_MAX_ELEMENTS = 1 << 24
"""Largest input torch.quantile accepts; larger activations are strided down to it before clipping."""

LOG_EPS = 1e-6
"""Floor inside log(|x| + eps): exact zeros (masked softmax entries) map to ~0 rather than -inf."""


def affine_params(lo, hi, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and integer zero point of the affine grid covering [lo, hi] (widened to include 0)."""
    lo = torch.clamp(torch.as_tensor(lo, dtype=torch.float32), max=0.0)
    hi = torch.clamp(torch.as_tensor(hi, dtype=torch.float32), min=0.0)
    scale = torch.clamp((hi - lo) / (2**bits - 1), min=1e-12)
    zero = torch.round(-lo / scale)
    return scale, zero


def quantize_affine(x: torch.Tensor, scale, zero, bits: int) -> torch.Tensor:
    """x_hat = s (clip(round(x / s) + z, 0, 2^b - 1) - z)."""
    scale = torch.as_tensor(scale, dtype=x.dtype, device=x.device)
    zero = torch.as_tensor(zero, dtype=x.dtype, device=x.device)
    q = torch.clamp(torch.round(x / scale) + zero, 0, 2**bits - 1)
    return scale * (q - zero)


def quantize_log(x: torch.Tensor, scale, zero, bits: int, eps: float = LOG_EPS) -> torch.Tensor:
    """x_hat = sign(x) (exp(s (x_q - z)) - eps) with x_q = clip(round(log(|x| + eps) / s) + z, 0, 2^b - 1).

    Levels are dense near zero and sparse at the top, matching softmax outputs where most mass sits
    in a few large probabilities and the many small ones only need their order of magnitude.
    """
    scale = torch.as_tensor(scale, dtype=x.dtype, device=x.device)
    zero = torch.as_tensor(zero, dtype=x.dtype, device=x.device)
    q = torch.clamp(torch.round(torch.log(x.abs() + eps) / scale) + zero, 0, 2**bits - 1)
    return torch.sign(x) * (torch.exp(scale * (q - zero)) - eps)


def log_params(lo, hi, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and zero point of the log grid covering log-magnitudes [lo, hi]."""
    lo = torch.as_tensor(lo, dtype=torch.float32)
    hi = torch.maximum(torch.as_tensor(hi, dtype=torch.float32), lo + 1e-6)
    scale = (hi - lo) / (2**bits - 1)
    zero = torch.round(-lo / scale)
    return scale, zero


def value_range(x: torch.Tensor, axis: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Min and max of `x` over everything (axis=None) or over all dims except `axis` (kept, broadcastable)."""
    if axis is None:
        return x.min(), x.max()
    axis = axis % x.ndim
    dims = [d for d in range(x.ndim) if d != axis]
    return x.amin(dim=dims, keepdim=True), x.amax(dim=dims, keepdim=True)


def fake_quantize(x: torch.Tensor, bits: int, kind: str = "linear", axis: int | None = None) -> torch.Tensor:
    """Round `x` onto its own b-bit grid (dynamic range), per tensor or per `axis` (channel / row)."""
    if kind == "log":
        lo, hi = value_range(torch.log(x.abs() + LOG_EPS), axis)
        return quantize_log(x, *log_params(lo, hi, bits), bits)
    lo, hi = value_range(x, axis)
    return quantize_affine(x, *affine_params(lo, hi, bits), bits)


class ActivationQuantizer:
    """One activation quantization point (a layer input, or Q, K, V, A of a cross-attention).

    mode: "observe" collects the range over calibration calls, "static" uses the stored range,
    "dynamic" measures the range on each call, "off" passes through. Entries where `keep` is True
    (the protected trigger / start-token rows or columns) bypass the quantizer and are also left
    out of the range, so one heavy-tailed trigger row cannot stretch the grid for every other token.
    """

    def __init__(self, bits: int, kind: str = "linear", mode: str = "dynamic", lo: float | None = None, hi: float | None = None,
                 clip_percentile: float = 100.0):
        if kind not in ("linear", "log"):
            raise ValueError(f"unknown quantizer {kind!r}: use 'linear' or 'log'")
        if not 50.0 < clip_percentile <= 100.0:
            raise ValueError(f"clip_percentile={clip_percentile} must be in (50, 100]")
        self.bits, self.kind, self.mode, self.lo, self.hi = bits, kind, mode, lo, hi
        self.clip_percentile = clip_percentile
        self._observed_calls = 0
        self._grid_of: tuple | None = None  # (lo, hi, bits) the cached grid was computed for
        self._grid: tuple[torch.Tensor, torch.Tensor] | None = None
        self._numbers: tuple[tuple, float, int] | None = None  # (grid, scale, zero) as Python numbers
        self._last: tuple | None = None  # (input, its version, keep, result) of the last small static call
        self.group: int | None = None  # the timestep group whose range lo/hi hold now (None: one range for all)
        self.group_ranges: dict[int, tuple] = {}  # the other groups' (lo, hi, observed calls)

    def select_group(self, group: int) -> None:
        """Make `lo`/`hi` the range of timestep group `group`, keeping the current one aside.

        While observing, each group collects its own range; when static, a group calibration never saw
        (another step count at serving) takes the range of the nearest calibrated group.
        """
        if self.group is not None:
            self.group_ranges[self.group] = (self.lo, self.hi, self._observed_calls)
        found = self.group_ranges.get(group)
        if found is None or (found[0] is None and self.mode != "observe"):
            seen = [g for g, r in self.group_ranges.items() if r[0] is not None]
            found = self.group_ranges[min(seen, key=lambda g: abs(g - group))] if seen and self.mode != "observe" else (None, None, 0)
        self.lo, self.hi, self._observed_calls = found
        self.group = group

    def grouped_ranges(self) -> dict[int, list]:
        """Timestep group -> [lo, hi], the current group's included."""
        ranges = {g: [r[0], r[1]] for g, r in self.group_ranges.items()}
        if self.group is not None:
            ranges[self.group] = [self.lo, self.hi]
        return dict(sorted(ranges.items()))

    def grid(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Scale and zero point of the stored range on this quantizer's grid, computed once per range.

        Recomputing them on every call cost a dozen tiny tensor ops per layer, a large share of a
        small UNet's step. The cache follows `lo`/`hi` by identity, so assigning a new range renews it.
        """
        if self.lo is None:
            raise RuntimeError("static activation quantizer used before calibration")
        of = self._grid_of
        if of is None or of[0] is not self.lo or of[1] is not self.hi or of[2] != self.bits:
            params = log_params if self.kind == "log" else affine_params
            self._grid, self._grid_of = params(self.lo, self.hi, self.bits), (self.lo, self.hi, self.bits)
        return self._grid

    def grid_numbers(self) -> tuple[float, int]:
        """`grid()` of a per-tensor range as (scale, integer zero point) Python numbers, for fused and integer kernels."""
        grid = self.grid()
        if self._numbers is None or self._numbers[0] is not grid:
            self._numbers = (grid, float(grid[0]), int(grid[1]))
        return self._numbers[1], self._numbers[2]

    def _range(self, x: torch.Tensor, keep: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Min and max of the unprotected entries (in the log domain for the log grid); None if all are kept."""
        values = x.detach()
        if self.kind == "log":
            values = torch.log(values.abs() + LOG_EPS)
        if keep is None:
            return torch.aminmax(values)
        keep = keep.expand_as(values)
        if bool(keep.all()):
            return None
        return values.masked_fill(keep, float("inf")).min(), values.masked_fill(keep, float("-inf")).max()

    def _clipped_range(self, x: torch.Tensor, keep: torch.Tensor | None) -> tuple[float, float] | None:
        """The (100 - p)th and pth percentiles of the unprotected entries: the clipping range of one call.

        Percentile clipping (as in TensorRT / Q-Diffusion-era PTQ) gives up a few outliers for a finer grid
        over the bulk; leaving protected entries out here is what makes TAQ change calibration.
        """
        values = x.detach().float()
        if self.kind == "log":
            values = torch.log(values.abs() + LOG_EPS)
        values = values.flatten() if keep is None else values[~keep.expand_as(values)]
        if values.numel() == 0:
            return None
        if values.numel() > QUANTILE_MAX_ELEMENTS:  # torch.quantile's limit; an even stride keeps the distribution
            values = values[:: -(-values.numel() // QUANTILE_MAX_ELEMENTS)]
        q = torch.tensor([1.0 - self.clip_percentile / 100.0, self.clip_percentile / 100.0])
        lo, hi = torch.quantile(values, q).tolist()
        return lo, hi

    def observe(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> None:
        """Widen the range to this call (min/max), or, when clipping, average the per-call percentile ranges."""
        if self.clip_percentile < 100.0:
            measured = self._clipped_range(x, keep)
            if measured is None:
                return
            self._observed_calls += 1
            n, (lo, hi) = self._observed_calls, measured
            self.lo = lo if self.lo is None else self.lo + (lo - self.lo) / n
            self.hi = hi if self.hi is None else self.hi + (hi - self.hi) / n
            return
        measured = self._range(x, keep)
        if measured is None:
            return
        lo, hi = (v.item() for v in measured)
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)

    def __call__(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        if self.mode == "static" and x.numel() <= REUSE_MAX_ELEMENTS:
            return self._reused(x, keep)
        return self._quantize(x, keep)

    def _reused(self, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        """The last result again when `x` is the same unchanged tensor, on the same grid, with the same protected entries."""
        grid, last = self.grid(), self._last
        if (last is not None and last[0] is x and last[1] == x._version and last[2] is grid
                and (keep is None if last[3] is None else keep is not None and keep.shape == last[3].shape and torch.equal(keep, last[3]))):
            return last[4]
        out = self._quantize(x, keep)
        self._last = (x, x._version, grid, None if keep is None else keep.clone(), out)
        return out

    def _quantize(self, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        if self.mode == "off":
            return x
        if self.mode == "observe":
            self.observe(x, keep)
            return x
        if self.mode == "dynamic":
            measured = self._range(x, keep)
            if measured is None:
                return x
            grid = (log_params if self.kind == "log" else affine_params)(*measured, self.bits)
            xq = (quantize_log if self.kind == "log" else quantize_affine)(x, *grid, self.bits)
        elif self.kind == "log" or self.grid()[0].numel() > 1:
            xq = (quantize_log if self.kind == "log" else quantize_affine)(x, *self.grid(), self.bits)
        else:
            xq = self._fast_affine(x)
        return xq if keep is None else torch.where(keep, x, xq)

    def _fast_affine(self, x: torch.Tensor) -> torch.Tensor:
        """`quantize_affine` on the stored per-tensor grid in two fused ops rather than eight (a tenth of the time
        on a small UNet's tensors): x * (1/s) rounded half to even, as the CPU int8 kernels round it."""
        scale, zero = self.grid_numbers()
        with warnings.catch_warnings():  # quantized tensors are deprecated as a type; this one lives for one line
            warnings.simplefilter("ignore")
            xq = torch.quantize_per_tensor(x.float(), scale, zero, torch.quint8).dequantize().to(x.dtype)
        if self.bits < 8:
            xq = xq.clamp_(-zero * scale, (2**self.bits - 1 - zero) * scale)
        return xq

    def state(self) -> dict:
        return {"bits": self.bits, "kind": self.kind, "lo": self.lo, "hi": self.hi}
