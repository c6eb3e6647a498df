"""The UNets one server runs: its full-precision base UNet and the quantized variants, held so that a
quantized setting really saves memory.

A quantized setting serves its quantized UNet alone. Without a byte budget the UNets held together
never exceed the bytes of the full-precision base UNet, so switching settings never holds more than a
full-precision-only server would: asking for W8A8 drops the full-precision UNet (written once to disk
first, so FP32 can come back), asking for FP32 again drops the quantized ones. With a budget, the cache's
LRU decides: the full-precision UNet stays while the budget allows and it was used recently.
Saved variants load their low-bit tensors straight into quantized modules (`load_quantized`), never
through a full-precision copy.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

from personalq.diffusers_import import DIFFUSERS_IMPORT
from personalq.serving.cache import ResidentCache, ResidentEntry, resident_bytes
from personalq.serving.requests import ServingError

FULL = "unet:base"
"""Cache name of the base model's full-precision UNet."""

UNET_KINDS = ("unet", "quantized")
SNAPSHOT = "full-precision-unet"
"""Folder (beside the base's quantized variants) the full-precision UNet is written to before it is dropped."""


class UnetVariants:
    """Finds or makes the UNet a request runs, keeping the resident UNets within their allowance."""

    def __init__(self, pipe, cache: ResidentCache, variants_dir: Path, calibration_prompts: int, calibration_steps: int):
        self.pipe, self.cache = pipe, cache
        self.snapshot_dir = Path(variants_dir) / SNAPSHOT
        self.calibration_prompts, self.calibration_steps = calibration_prompts, calibration_steps
        self.device, self.dtype = pipe.unet.device, pipe.unet.dtype
        self._snapshot_written = False  # written once per server: a snapshot left by an earlier run may be of other weights
        self.allowance = resident_bytes(pipe.unet)
        """Bytes the UNets may hold together when no budget is set: one full-precision UNet's."""
        cache.put(FULL, "unet", pipe.unet)

    def full(self):
        """The base's full-precision UNet, read back from its snapshot when it was dropped."""
        unet = self.cache.get(FULL)
        if unet is None:
            with DIFFUSERS_IMPORT:
                from diffusers import UNet2DConditionModel

            self._make_room(self.allowance)
            unet = UNet2DConditionModel.from_pretrained(self.snapshot_dir).to(device=self.device, dtype=self.dtype).eval()
            self._put(FULL, "unet", unet)
        return unet

    def quantized(self, name: str, source, setting: str, protect: str, directory: Path, progress=None):
        """The quantized variant `name` of the UNet `source()` gives: resident, saved in `directory`, or made now.

        The variant is left in the pipeline; `source` is called only when the variant must be made.
        """
        unet = self.cache.get(name)
        if unet is not None:
            return unet
        if progress:
            progress(0, 1, f"preparing {setting} weights")
        saved = directory / "taq.json"
        if saved.exists():
            self._make_room(sum(f.stat().st_size for f in directory.glob("*.safetensors")))
            _taq().load_quantized(self.pipe, directory)
        else:
            self._quantize(self._float_copy(source()), setting, protect, directory)
        unet = self.pipe.unet
        self._put(name, "quantized", unet)
        return unet

    def forget(self, entry: ResidentEntry) -> None:
        """An entry left the cache: write the full-precision UNet to disk first, so FP32 can come back."""
        if entry.name == FULL and not self._snapshot_written:
            unet = entry.value
            if getattr(unet, "peft_config", None):
                unet.unload_lora()  # the adapter slot is rebuilt on the UNet read back
            tmp = self.snapshot_dir.with_name(self.snapshot_dir.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            unet.save_pretrained(tmp, safe_serialization=True)
            shutil.rmtree(self.snapshot_dir, ignore_errors=True)
            os.replace(tmp, self.snapshot_dir)
            self._snapshot_written = True

    def _float_copy(self, source_unet):
        """The UNet to quantize: the base UNet itself when it must be dropped anyway (no second copy), else a copy."""
        if source_unet is self.cache.get(FULL) and not self._fits_beside_full():
            self.cache.evict(FULL)  # written to disk by `forget`; quantized in place below
            unet = source_unet
        else:
            unet = copy.deepcopy(source_unet)
        if getattr(unet, "peft_config", None):
            unet.unload_lora()  # quantize the bare weights; the adapter slot is made again on the variant
        for attr in ("_pq_slot_rank", "_pq_lora_id", "_pq_adapters_on"):
            if hasattr(unet, attr):
                delattr(unet, attr)
        return unet

    def _fits_beside_full(self) -> bool:
        """With a budget, keep the full-precision UNet and make a copy while the budget holds both."""
        budget = self.cache.budget_bytes
        return budget is not None and self.cache.total_bytes() + self.allowance <= budget

    def _quantize(self, unet, setting: str, protect: str, directory: Path):
        taq = _taq()
        self.pipe.register_modules(unet=unet)
        config = taq.QuantConfig.from_setting(setting, protect=protect)
        prompts = taq.calibration_prompts(n=self.calibration_prompts)
        taq.quantize(self.pipe, config, calibration_prompts=prompts, num_inference_steps=self.calibration_steps)
        directory.mkdir(parents=True, exist_ok=True)
        taq.save_quantized(self.pipe, directory)

    def _make_room(self, nbytes: int) -> None:
        """Without a budget, drop least recently used UNets until `nbytes` more fit in the allowance."""
        if self.cache.budget_bytes is None:
            self.cache.evict_kinds_until(UNET_KINDS, self.allowance - nbytes)

    def _put(self, name: str, kind: str, unet) -> None:
        self._make_room(resident_bytes(unet))
        try:
            self.cache.put(name, kind, unet)
        except MemoryError as error:
            raise ServingError(f"{name} does not fit: {error}") from None


def _taq():
    try:
        import personalq.taq as taq
    except ImportError as error:
        raise ServingError(f"quantized settings need the TAQ package, which is not available ({error})") from None
    return taq
