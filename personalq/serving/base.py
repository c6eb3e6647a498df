"""Loading the one resident base model from wherever the user keeps it.

Users download Stable Diffusion as a hub repo, a diffusers folder or, most often, a single
`.safetensors` file; all three load through diffusers, and the family ("sd15", "sdxl", "pq-nano")
is recorded so that checkpoints made for another base can be refused by name before they fail by shape.
"""

from __future__ import annotations

from pathlib import Path

import torch

from personalq.diffusers_import import DIFFUSERS_IMPORT
from personalq.errors import first_line
from personalq.protocols import BaseModelLoader
from personalq.serving.requests import ServingError

SINGLE_FILE_SUFFIXES = (".safetensors", ".ckpt")
_SDXL_SINGLE_FILE_KEY = "conditioner.embedders.1."

_FAMILY_ALIASES = {
    "sd15": "sd15", "sd1.5": "sd15", "sd-1.5": "sd15", "sd1": "sd15", "sd-v1-5": "sd15", "stable-diffusion-v1-5": "sd15",
    "sdxl": "sdxl", "sdxl-turbo": "sdxl", "sd-xl": "sdxl", "sdxl-base": "sdxl", "sdxl1.0": "sdxl",
    "pq-nano": "pq-nano", "nano": "pq-nano",
}


def base_family(name: str | None) -> str | None:
    """Canonical family of a base-model name as catalogs write it; unknown names pass through lower-cased."""
    if name is None or not str(name).strip():
        return None
    key = str(name).strip().lower()
    return _FAMILY_ALIASES.get(key, _FAMILY_ALIASES.get(key.rsplit("/", 1)[-1], key))


def _single_file_keys(path: Path) -> list[str]:
    """The tensor names of a single-file checkpoint, without reading its weights."""
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            return list(f.keys())
    try:
        checkpoint = torch.load(str(path), map_location="meta", weights_only=True)
    except Exception as error:  # torch's own message advises weights_only=False, unsafe for a file of unknown origin
        raise ServingError(f"{path.name} is not a readable PyTorch checkpoint ({type(error).__name__})") from error
    return list(checkpoint.get("state_dict", checkpoint))


_LOADERS: list[BaseModelLoader] = []


def register_base_loader(loader: BaseModelLoader) -> None:
    """Serve the base models `loader` handles; loaders registered later are asked first, all before the built-in ones."""
    _LOADERS.insert(0, loader)


def _load_registered(spec: str, dtype: torch.dtype):
    loader = next((candidate for candidate in _LOADERS if candidate.handles(spec)), None)
    if loader is None:
        return None
    try:
        return loader.load(spec, dtype), loader.family
    except ServingError:
        raise
    except Exception as error:  # a loader's own failure is still one line for the user
        raise ServingError(f"cannot load base model {spec!r}: {first_line(error)}") from error


def load_base_pipeline(spec: str, dtype: torch.dtype, single_file_config: str | Path | None = None):
    """(pipeline, family) for a registered loader's model, "pq-nano", a local diffusers folder, a single-file
    checkpoint or a hub id."""
    registered = _load_registered(spec, dtype)
    if registered is not None:
        return registered
    with DIFFUSERS_IMPORT:
        from diffusers import (
            DiffusionPipeline,
            StableDiffusionPipeline,
            StableDiffusionXLPipeline,
        )

    if base_family(spec) == "pq-nano":
        try:
            from personalq.nano import load_pipeline
        except ImportError as error:
            raise ServingError(f"PQ-Nano is not available ({error}); pass a base model (hub id, folder or file)") from None
        pipe = load_pipeline()
        pipe.to(dtype=dtype)
        return pipe, "pq-nano"
    path = Path(spec).expanduser()
    try:
        if path.is_dir():
            pipe = DiffusionPipeline.from_pretrained(str(path), dtype=dtype)
        elif path.is_file():
            if path.suffix not in SINGLE_FILE_SUFFIXES:
                raise ServingError(f"{path.name}: a single-file base model must be {' or '.join(SINGLE_FILE_SUFFIXES)}")
            sdxl = any(key.startswith(_SDXL_SINGLE_FILE_KEY) for key in _single_file_keys(path))
            cls = StableDiffusionXLPipeline if sdxl else StableDiffusionPipeline
            kwargs = {"config": str(single_file_config)} if single_file_config else {}
            pipe = cls.from_single_file(str(path), dtype=dtype, **kwargs)
        else:
            pipe = DiffusionPipeline.from_pretrained(spec, dtype=dtype)
    except ServingError:
        raise
    except Exception as error:  # diffusers raises many types; the user needs the one line
        raise ServingError(f"cannot load base model {spec!r}: {first_line(error)}") from error
    if getattr(pipe, "safety_checker", None) is not None:
        pipe.safety_checker = None  # personal checkpoints of one's own subjects; the checker also needs CLIP vision weights
    return pipe, "sdxl" if isinstance(pipe, StableDiffusionXLPipeline) else "sd15"
