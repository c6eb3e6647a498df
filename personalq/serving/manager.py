"""One resident base pipeline serving every checkpoint of a repository at any bit-width.

Switching checkpoint is the hot path: LoRAs are hot-swapped into one adapter slot per UNet (a copy
of tensors already in memory, no new modules, nothing to recompile), DreamBooth components and
quantized UNet variants are swapped in by reference, and everything loaded stays in an LRU cache
bounded by real resident bytes.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

import torch

from personalq.diffusers_import import DIFFUSERS_IMPORT
from personalq.errors import first_line
from personalq.serving.base import base_family, load_base_pipeline
from personalq.serving.cache import ResidentCache, ResidentEntry
from personalq.serving.checkpoints import (
    LOADERS,
    DreamBoothPayload,
    LoraPayload,
    TextualInversionPayload,
)
from personalq.serving.config import ServingConfig, resolve_device_dtype
from personalq.serving.requests import (
    GenerationRequest,
    GenerationResult,
    ProgressCallback,
    RequestCancelled,
    ServingError,
)
from personalq.serving.triggers import TriggerSlots
from personalq.serving.unets import FULL, UnetVariants
from personalq.setting import FLOAT_DTYPE_SETTINGS, Setting, SettingError, get_setting

logger = logging.getLogger(__name__)

LORA_ADAPTER = "pq"
SHARED_COMPONENTS = ("text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2", "vae")
"""What every setting and checkpoint shares (a DreamBooth checkpoint may bring its own); the UNets live in `unets`."""
MIN_SLOT_RANK = 16
"""Adapter slots are made at least this rank so LoRAs of any smaller rank hot-swap into them."""



def resolve_setting(name: str, device: torch.device, dtype: torch.dtype) -> Setting:
    """The setting a request names, refused in one line when this server cannot run it.

    A full-precision setting runs in the dtype the server was loaded in (the text encoder and VAE are
    shared by every setting), so FP16/BF16 on a server of another dtype is refused rather than run
    silently in the wrong one.
    """
    try:
        setting = get_setting(name, device.type)
    except SettingError as error:
        raise ServingError(str(error)) from None
    served = str(dtype).removeprefix("torch.")
    if not setting.quantized and setting.dtype != served:
        raise ServingError(
            f"setting {setting.name} runs in {setting.dtype}, but this server was loaded in {served}: "
            f"start it with --dtype {setting.dtype} or choose {FLOAT_DTYPE_SETTINGS[served]}"
        )
    return setting


def _not_the_checkpoints_fault(error: BaseException) -> bool:
    """A memory budget too small for it says nothing about the checkpoint itself."""
    return isinstance(error, MemoryError) or isinstance(error.__context__, MemoryError)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[-80:] or "base"


class PipelineManager:
    """Generates images for requests naming any checkpoint of the store and any bit-width setting.

    Thread-safe: the pipeline's state (attached checkpoint, active UNet) belongs to the request
    being run, so `generate` runs one request at a time; use one manager per device.
    """

    def __init__(self, config: ServingConfig | None = None, store=None, *, pipeline=None, family: str | None = None):
        self.config = config or ServingConfig()
        self.device, self.dtype = resolve_device_dtype(self.config.device, self.config.dtype)
        self._store = store
        self._lock = threading.RLock()
        if pipeline is None:
            pipeline, family = load_base_pipeline(self.config.base_model, self.dtype, self.config.single_file_config)
        if pipeline.dtype != self.dtype:
            pipeline.to(dtype=self.dtype)  # a pipeline built elsewhere runs in the dtype asked for too, never silently in its own
        self.pipe = pipeline.to(self.device)
        self.pipe.set_progress_bar_config(disable=True)
        self.family = family or ("sdxl" if "XL" in type(pipeline).__name__ else "sd15")
        self._shared = {name: getattr(self.pipe, name) for name in SHARED_COMPONENTS if getattr(self.pipe, name, None) is not None}
        self.slots = TriggerSlots(self.pipe)  # before the base is measured: the slot rows are part of it
        self._attached: str | None = None
        self.cache = ResidentCache(self.config.memory_budget_bytes, on_evict=self._forget)
        try:
            self.cache.put("base", "base", dict(self._shared), pinned=True)
            self.unets = UnetVariants(self.pipe, self.cache, self._quantized_dir("base", None),
                                      self.config.calibration_prompts, self.config.calibration_steps)
        except MemoryError as error:
            raise ServingError(f"the base model alone does not fit: {error}") from None

    @classmethod
    def from_pipeline(cls, pipeline, family: str, config: ServingConfig | None = None, store=None) -> PipelineManager:
        """Serve an already built pipeline (benchmarks on random-weight models, tests)."""
        return cls(config, store, pipeline=pipeline, family=family)

    # ---- public ---------------------------------------------------------------------------------

    @property
    def store(self):
        if self._store is None:
            from personalq.config import personalq_home
            from personalq.store import RepoStore

            self._store = RepoStore.open(personalq_home())
        return self._store

    def default_guidance(self) -> float:
        """No guidance for SDXL-Turbo (distilled for it), PQ-Nano's own default, else SD's 7.5."""
        if "turbo" in str(self.config.base_model).lower():
            return 0.0
        if self.family == "pq-nano":
            from personalq.nano import DEFAULT_GUIDANCE

            return DEFAULT_GUIDANCE
        return 7.5

    def resident(self) -> list[tuple[str, str, int]]:
        """What is resident now, least recently used first: (name, kind, real bytes)."""
        return self.cache.entries()

    def resident_bytes(self) -> int:
        return self.cache.total_bytes()

    def generate(
        self,
        request: GenerationRequest,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> GenerationResult:
        """Run one request; a bad request raises ServingError with its reason and leaves the manager serving."""
        with self._lock:
            start = time.perf_counter()
            if cancel is not None and cancel.is_set():
                raise RequestCancelled("cancelled before it started")
            setting = resolve_setting(request.setting, self.device, self.dtype)
            quantized = setting.quantized
            if request.steps < 1:
                raise ServingError(f"steps must be at least 1, got {request.steps}")
            card = self._card(request.checkpoint_id)
            try:
                triggers = self._switch(card, setting.name, quantized, request.taq, progress)
                switched = time.perf_counter()
                image, protected = self._run(request, card, triggers, quantized and request.taq, progress, cancel)
            except RequestCancelled:
                self._detach_all()
                raise
            except Exception as error:
                self._detach_all()
                if card is not None and not _not_the_checkpoints_fault(error):
                    raise self._broken(card, error) from error
                if isinstance(error, ServingError):
                    raise
                raise ServingError(f"generation: {type(error).__name__}: {first_line(error)}") from error
            finally:
                self.cache.release()
            if card is not None and hasattr(self.store, "mark_used"):
                try:
                    self.store.mark_used(card.id)
                except Exception as error:  # noqa: BLE001 (bookkeeping must not fail a finished image)
                    logger.warning("could not mark %s used: %s", card.id, error)
            return GenerationResult(
                image=image,
                seconds=time.perf_counter() - start,
                setting=setting.name,
                resident_bytes=self.cache.total_bytes(),
                checkpoint_id=card.id if card is not None else None,
                seed=request.seed,
                switch_seconds=switched - start,
                steps=request.steps,
                protected_triggers=protected,
            )

    # ---- checkpoints ----------------------------------------------------------------------------

    def _card(self, checkpoint_id: str | None):
        if not checkpoint_id:
            return None
        try:
            card = self.store.get(checkpoint_id)
        except KeyError:
            card = None
        except Exception as error:  # noqa: BLE001 (any store failure is this request's reason)
            raise ServingError(f"checkpoint {checkpoint_id}: {first_line(error)}") from None
        if card is None:
            raise ServingError(f"checkpoint {checkpoint_id}: not in the store")
        reason = self._broken_reasons().get(card.id)
        if reason is not None:
            raise ServingError(f"checkpoint {card.id} is marked broken ({reason}); re-add a fixed file to use it again")
        wanted = base_family(card.base_model)
        if wanted is not None and wanted != self.family:
            raise ServingError(
                f"checkpoint {card.id} was made for base model {card.base_model}, but {self.family} is loaded"
            )
        return card

    def _broken_reasons(self) -> dict[str, str]:
        broken = getattr(self.store, "broken", None)
        return broken() if callable(broken) else {}

    def _broken(self, card, error: Exception) -> ServingError:
        """Mark the checkpoint broken in the store (it is not tried again until fixed); the request's error."""
        reason = first_line(error) if isinstance(error, ServingError) else f"{type(error).__name__}: {first_line(error)}"
        reason = reason.removeprefix(f"checkpoint {card.id}: ")
        mark = getattr(self.store, "mark_broken", None)
        if callable(mark):
            try:
                mark(card.id, reason)
            except KeyError:  # its row went while this request loaded it (another node removed it): not broken
                return ServingError(f"checkpoint {card.id} was removed while this request was loading it")
            except Exception as failure:  # noqa: BLE001 (the request's own error is what the user must see)
                logger.warning("could not mark %s broken: %s", card.id, failure)
        return ServingError(f"checkpoint {card.id}: {reason} (marked broken: not tried again until fixed)")

    def _payload(self, card):
        kind = card.kind or "lora"
        if kind not in LOADERS:
            raise ServingError(f"checkpoint {card.id}: unknown kind {kind!r}")
        name = f"{kind}:{card.id}"
        payload = self.cache.get(name)
        if payload is None:
            try:
                if kind == "dreambooth":
                    payload = LOADERS[kind](card, self.pipe, self.device, self.dtype, self.config.single_file_config)
                else:
                    payload = LOADERS[kind](card, self.pipe, self.device, self.dtype)
            except ServingError:
                raise
            except Exception as error:
                raise ServingError(f"checkpoint {card.id}: cannot load {kind}: {first_line(error)}") from error
            self._put(name, kind, payload)
        self.cache.hold([name])
        return payload

    def _put(self, name: str, kind: str, value) -> None:
        try:
            self.cache.put(name, kind, value)
        except MemoryError as error:
            raise ServingError(f"{name} does not fit: {error}") from None

    def _switch(self, card, setting: str, quantized: bool, taq: bool, progress) -> list[str]:
        """Make the pipeline serve `card` at `setting`; return the trigger tokens now in the tokenizer."""
        if progress:
            progress(0, 1, f"attaching {card.id}" if card else "detaching checkpoint")
        payload = self._payload(card) if card is not None else None
        components = dict(self._shared)
        source_name, source = "base", self.unets.full
        if isinstance(payload, DreamBoothPayload):
            components.update(payload.components)
            source_name = f"dreambooth:{card.id}"
            source = lambda: payload.components["unet"]  # noqa: E731
        components.pop("unet", None)
        self.slots.clear()
        self.pipe.register_modules(**components)  # plain attribute swaps; nothing is copied
        unet_name, unet = self._unet_variant(source_name, source, setting, quantized, taq, card, progress)
        self.pipe.register_modules(unet=unet)
        triggers: list[str] = []
        if isinstance(payload, LoraPayload):
            self._attach_lora(unet_name, unet, payload)
            triggers = self._assign_slots(card, payload.trigger_embeddings)
        elif getattr(unet, "_pq_adapters_on", False):
            unet.disable_adapters()
            unet._pq_adapters_on = False
        if isinstance(payload, TextualInversionPayload):
            second = payload.embeddings.get("text_encoder_2")
            triggers = self._assign_slots(card, {card.trigger: payload.embeddings["text_encoder"]}, None if second is None else {card.trigger: second})
        elif isinstance(payload, DreamBoothPayload):
            triggers = [t for t in card.triggers]
        self._attached = card.id if card is not None else None
        return triggers

    def _attach_lora(self, unet_name: str, unet, payload: LoraPayload) -> None:
        """Hot-swap the LoRA into the UNet's adapter slot; make the slot on first use or when the rank outgrows it."""
        if getattr(unet, "_pq_lora_id", None) != payload.checkpoint_id:
            slot_rank = getattr(unet, "_pq_slot_rank", 0)
            unet._pq_lora_id = None  # a swap that fails halfway leaves the slot holding no known LoRA
            swapped = False
            if getattr(unet, "peft_config", None) and payload.rank <= slot_rank:
                swapped = self._hotswap(unet, payload)
            if not swapped:
                self._new_slot(unet_name, unet, payload, max(payload.rank, MIN_SLOT_RANK, slot_rank))
            unet._pq_lora_id = payload.checkpoint_id
        if not getattr(unet, "_pq_adapters_on", False):
            unet.enable_adapters()
            unet._pq_adapters_on = True

    def _hotswap(self, unet, payload: LoraPayload) -> bool:
        """Copy the LoRA into the existing slot (peft's hot-swap); False when the slot cannot take it."""
        try:
            if payload.prepare_hotswap(LORA_ADAPTER):
                from peft.utils.hotswap import hotswap_adapter_from_state_dict

                hotswap_adapter_from_state_dict(unet, payload.peft_state_dict, LORA_ADAPTER, config=payload.lora_config)
            else:
                self._lora_loader()(dict(payload.unet_state_dict), payload.network_alphas, unet, adapter_name=LORA_ADAPTER,
                                    _pipeline=self.pipe, metadata=payload.metadata, hotswap=True)
            return True
        except (ValueError, RuntimeError, KeyError) as error:  # e.g. it targets other modules than the slot's LoRA
            logger.info("hot-swap of %s refused (%s); making a new slot", payload.checkpoint_id, error)
            return False

    def _new_slot(self, unet_name: str, unet, payload: LoraPayload, rank: int) -> None:
        """Load the LoRA as the UNet's one adapter, padded to `rank` so later LoRAs hot-swap into it."""
        if getattr(unet, "peft_config", None):
            unet.unload_lora()
        unet.enable_lora_hotswap(target_rank=rank)
        self._lora_loader()(dict(payload.unet_state_dict), payload.network_alphas, unet, adapter_name=LORA_ADAPTER,
                            _pipeline=self.pipe, metadata=payload.metadata, hotswap=False)
        unet._pq_slot_rank = rank
        unet._pq_adapters_on = True
        try:
            self.cache.remeasure(unet_name)
        except MemoryError as error:
            raise ServingError(f"the adapter slot of {unet_name} does not fit: {error}") from None

    def _lora_loader(self):
        with DIFFUSERS_IMPORT:
            from diffusers import StableDiffusionPipeline

        return getattr(type(self.pipe), "load_lora_into_unet", StableDiffusionPipeline.load_lora_into_unet)

    def _assign_slots(self, card, embeddings, embeddings_2=None) -> list[str]:
        try:
            return self.slots.assign(embeddings, embeddings_2)
        except ValueError as error:
            raise ServingError(f"checkpoint {card.id}: {error}") from None

    def _detach_all(self) -> None:
        """Back to the plain base after a failure: the adapter slot a failed load may have half-filled is
        removed from every UNet involved (not just disabled), so no layer, hook or config is left behind."""
        self.slots.reset()
        for unet in {id(u): u for u in (self.pipe.unet, self._shared.get("unet")) if u is not None}.values():
            if hasattr(unet, "unload_lora"):  # also when a load failed after injecting layers but before its config
                unet.unload_lora()
            unet._pq_lora_id, unet._pq_slot_rank, unet._pq_adapters_on = None, 0, False
        self.pipe.register_modules(**self._shared)
        self._attached = None

    def _forget(self, entry: ResidentEntry) -> None:
        """An entry was evicted: drop the pipeline's references too, or its memory would stay resident."""
        values = entry.value.values() if isinstance(entry.value, dict) else [entry.value]
        if isinstance(entry.value, DreamBoothPayload):
            values = entry.value.components.values()
        if any(self.pipe.unet is value for value in values):
            self.pipe.register_modules(unet=None)  # the next request puts its own UNet in
        if any(getattr(self.pipe, name, None) is value for value in values for name in self._shared):
            self._detach_all()
        self.unets.forget(entry)

    # ---- bit-widths -----------------------------------------------------------------------------

    def _unet_variant(self, source_name: str, source, setting: str, quantized: bool, taq: bool, card, progress) -> tuple[str, Any]:
        """(cache name, UNet) to run: the source's full-precision UNet, or its quantized variant (made once, saved, reused)."""
        if not quantized:
            name, unet = (FULL, source()) if source_name == "base" else (source_name, source())
        else:
            protect = "trigger" if taq else "none"
            name = f"quantized:{source_name}:{setting}:{protect}"
            directory = self._quantized_dir(source_name, card) / f"{setting}-{protect}"
            unet = self.unets.quantized(name, source, setting, protect, directory, progress)
        self.cache.hold([name])
        return name, unet

    def _quantized_dir(self, source_name: str, card) -> Path:
        if source_name != "base" and card is not None and card.file_path is not None:
            path = Path(card.file_path)
            return path.parent / f"{path.name}.quantized"
        if self.config.quantized_dir is not None:
            return Path(self.config.quantized_dir)
        from personalq.config import personalq_home

        home = getattr(self._store, "home", None) or personalq_home()  # the data directory of the store being served
        return Path(home) / "quantized" / _slug(f"{self.config.base_model}-{self.family}")

    # ---- denoising ------------------------------------------------------------------------------

    def _run(self, request: GenerationRequest, card, triggers: list[str], protect: bool, progress, cancel) -> tuple[Any, list[str]]:
        guidance = self.default_guidance() if request.guidance is None else request.guidance
        prompt, prompt_2 = self.slots.rewrite(request.prompt)
        kwargs: dict[str, Any] = {
            "prompt": prompt,
            "negative_prompt": request.negative_prompt,
            "num_inference_steps": request.steps,
            "guidance_scale": guidance,
            "generator": torch.Generator("cpu").manual_seed(request.seed),
            "height": request.height,
            "width": request.width,
        }
        if getattr(self.pipe, "tokenizer_2", None) is not None:
            kwargs["prompt_2"] = prompt_2
        protected = [t for t in triggers if t in request.prompt] if protect else []
        if protected:
            from personalq.taq import protection_kwargs

            kwargs["cross_attention_kwargs"] = protection_kwargs(
                self.pipe, [prompt], [self.slots.active.get(t, t) for t in protected], do_classifier_free_guidance=guidance > 1.0
            )

        def on_step_end(pipe, step: int, timestep, callback_kwargs):
            if cancel is not None and cancel.is_set():
                raise RequestCancelled(f"cancelled at step {step + 1} of {request.steps}")
            latents = callback_kwargs.get("latents")
            if latents is not None and not torch.isfinite(latents).all():  # else a black image, "successfully"
                raise ServingError(f"the image became NaN or infinite at step {step + 1} of {request.steps}")
            if progress:
                progress(step + 1, request.steps, "denoising")
            return callback_kwargs

        kwargs["callback_on_step_end"] = on_step_end
        # no_grad, not inference_mode: tensors a module caches during the call must stay ordinary, or
        # deep-copying that UNet later for a quantized variant fails on "inference tensors".
        with torch.no_grad():
            image = self.pipe(**kwargs).images[0]
        return image, protected
