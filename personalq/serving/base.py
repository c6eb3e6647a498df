"""Loading the one resident base model from wherever the user keeps it.

Users download Stable Diffusion as a hub repo, a diffusers folder or, most often, a single
`.safetensors` file; all three load through diffusers, and the family ("sd15", "sdxl", "pq-nano")
is recorded so that checkpoints made for another base can be refused by name before they fail by shape.
"""

from __future__ import annotations

from pathlib import Path

import torch

from personalq.serving.requests import ServingError, one_line

SINGLE_FILE_SUFFIXES = (".safetensors", ".ckpt")
_SDXL_SINGLE_FILE_KEY = "conditioner.embedders.1."
_SDXL_ENCODER_WIDTH_KEYS = (
    "conditioner.embedders.0.transformer.text_model.embeddings.position_embedding.weight",
    "conditioner.embedders.1.model.positional_embedding",
)

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


def _single_file_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's name and shape in a single-file checkpoint, without reading its weights."""
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            return {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}  # noqa: SIM118 (safe_open is no dict)
    checkpoint = torch.load(str(path), map_location="meta", weights_only=True)
    checkpoint = checkpoint.get("state_dict", checkpoint)
    return {key: tuple(tensor.shape) for key, tensor in checkpoint.items() if isinstance(tensor, torch.Tensor)}


def _open_clip_text_encoder(path: Path, dtype: torch.dtype, config: str | Path):
    """SDXL's second text encoder (OpenCLIP, `conditioner.embedders.1.model.*`) read from the file by hand.

    diffusers tells SDXL's two encoders apart by width alone (768 vs 1280 in the real model); when a
    file's two widths are equal, `from_single_file` loads `conditioner.embedders.0` into
    `text_encoder_2` too and leaves its `text_projection` unloaded on the meta device. Only small
    SDXL-layout models (the tests' random ones) have equal widths; real SDXL files never come here.
    """
    from diffusers.loaders.single_file_utils import convert_open_clip_checkpoint, load_single_file_checkpoint
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    encoder = CLIPTextModelWithProjection(CLIPTextConfig.from_pretrained(str(config), subfolder="text_encoder_2"))
    state = convert_open_clip_checkpoint(encoder, load_single_file_checkpoint(str(path)), prefix=_SDXL_SINGLE_FILE_KEY + "model.")
    encoder.load_state_dict(state, strict=True)
    return encoder.to(dtype=dtype).eval()


def load_base_pipeline(spec: str, dtype: torch.dtype, single_file_config: str | Path | None = None):
    """(pipeline, family) for "pq-nano", a local diffusers folder, a single-file checkpoint or a hub id."""
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
            shapes = _single_file_shapes(path)
            sdxl = any(key.startswith(_SDXL_SINGLE_FILE_KEY) for key in shapes)
            cls = StableDiffusionXLPipeline if sdxl else StableDiffusionPipeline
            kwargs = {"config": str(single_file_config)} if single_file_config else {}
            widths = [shapes.get(key, (None,))[-1] for key in _SDXL_ENCODER_WIDTH_KEYS]
            if sdxl and single_file_config and widths[0] is not None and widths[0] == widths[1]:
                kwargs["text_encoder_2"] = _open_clip_text_encoder(path, dtype, single_file_config)
            pipe = cls.from_single_file(str(path), dtype=dtype, **kwargs)
        else:
            pipe = DiffusionPipeline.from_pretrained(spec, dtype=dtype)
    except ServingError:
        raise
    except Exception as error:  # diffusers raises many types; the user needs the one line
        raise ServingError(f"cannot load base model {spec!r}: {one_line(error)}") from error
    if getattr(pipe, "safety_checker", None) is not None:
        pipe.safety_checker = None  # personal checkpoints of one's own subjects; the checker also needs CLIP vision weights
    return pipe, "sdxl" if isinstance(pipe, StableDiffusionXLPipeline) else "sd15"
