"""What a `.safetensors` checkpoint says about itself: its header, its kind and base model, its metadata.

Only the JSON header is read (never the tensor data) so inspecting a 2 GB DreamBooth model costs
milliseconds. Validation of the header against the file is left to the `safetensors` library itself;
we add one check of our own before it: a header over `MAX_HEADER_BYTES` is refused without being
read (a real SDXL checkpoint's header is under 1 MB; the library's own limit is 100 MB).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from personalq.store.card import plausible_date
from personalq.store.errors import ImageRefused, MetadataRefused, StoreError
from personalq.store.metadata import parse_json

MAX_HEADER_BYTES = 16 * 1024 * 1024
PICKLE_SUFFIXES = (".ckpt", ".pt", ".pth", ".bin", ".pkl")
_CROSS_ATTENTION_BASES = {768: "sd15", 1024: "sd21", 2048: "sdxl"}
_TEXTUAL_INVERSION_KEYS = ("emb_params", "string_to_param", "clip_l", "clip_g")
_LORA_MARKERS = ("lora_a", "lora_b", "lora_down", "lora_up", "lora.down", "lora.up")


def pickle_refusal(path: Path) -> str:
    return (
        f"{path.name}: pickle-based {path.suffix} files can run arbitrary code when loaded, so PersonalQ only "
        "accepts .safetensors; convert it first, e.g. `python -c \"import torch, safetensors.torch as st; "
        f"sd = torch.load('{path.name}', weights_only=True); st.save_file(sd.get('state_dict', sd), "
        f"'{path.stem}.safetensors')\"`"
    )


@dataclass(frozen=True)
class SafetensorsHeader:
    tensors: dict[str, tuple[str, tuple[int, ...]]]  # name -> (dtype, shape)
    metadata: dict[str, str]
    size_bytes: int


def read_header(path: Path) -> SafetensorsHeader:
    """Parse and validate a safetensors header, raising `StoreError` with one line on any problem."""
    path = Path(path)
    if path.suffix.lower() in PICKLE_SUFFIXES:
        raise StoreError(pickle_refusal(path))
    if path.suffix.lower() != ".safetensors":
        raise StoreError(f"{path.name}: not a .safetensors file")
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise StoreError(f"{path.name}: truncated safetensors file ({size} bytes, no header)")
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > MAX_HEADER_BYTES:
                raise StoreError(
                    f"{path.name}: header of {header_len:,} bytes is over the {MAX_HEADER_BYTES // 2**20} MiB limit; not a sane checkpoint"
                )
            if 8 + header_len > size:
                raise StoreError(f"{path.name}: truncated safetensors file (header claims {header_len:,} bytes, file has {size:,})")
            raw = json.loads(handle.read(header_len))
    except OSError as error:
        raise StoreError(f"{path.name}: cannot read ({error.strerror or error})") from None
    except RecursionError:
        raise MetadataRefused(f"{path.name}: header nested too deeply to be a safetensors header") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise StoreError(f"{path.name}: corrupt safetensors header (not JSON)") from None
    _validate_with_library(path)
    metadata = raw.pop("__metadata__", None) or {}
    tensors = {name: (info["dtype"], tuple(info["shape"])) for name, info in raw.items()}
    return SafetensorsHeader(tensors=tensors, metadata={str(k): str(v) for k, v in metadata.items()}, size_bytes=size)


def _validate_with_library(path: Path) -> None:
    """Let `safetensors` check offsets, dtypes and file length the way loading will."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as handle:
            handle.metadata()
    except Exception as error:  # the library raises SafetensorError, OSError or ValueError
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise StoreError(f"{path.name}: corrupt or truncated safetensors file ({reason})") from None


def detect_kind(tensors: Mapping[str, tuple[str, tuple[int, ...]]]) -> str | None:
    names = [name.lower() for name in tensors]
    if any(marker in name for name in names for marker in _LORA_MARKERS):
        return "lora"
    if len(names) <= 4 and (
        any(name.split(".")[0] in _TEXTUAL_INVERSION_KEYS for name in names)
        or all(len(shape) in (1, 2) for _, shape in tensors.values())
    ):
        return "textual_inversion"
    if any(name.startswith(("model.diffusion_model.", "conv_in.", "down_blocks.", "unet.")) for name in names):
        return "dreambooth"
    return None


def detect_base_model(tensors: Mapping[str, tuple[str, tuple[int, ...]]]) -> str | None:
    """SD 1.5 vs SD 2 vs SDXL from the text-conditioning width the UNet (or embedding) expects."""
    names = list(tensors)
    if any(name.startswith("conditioner.") or "add_embedding" in name or name.startswith("lora_te2_") for name in names):
        return "sdxl"
    if "clip_g" in names:
        return "sdxl"
    for name, (_, shape) in tensors.items():
        lowered = name.lower()
        is_key_projection = "attn2" in lowered and ("to_k" in lowered or "to_v" in lowered)
        is_down_weight = not any(m in lowered for m in ("lora_b", "lora_up", "lora.up"))
        if is_key_projection and is_down_weight and len(shape) == 2 and shape[1] in _CROSS_ATTENTION_BASES:
            return _CROSS_ATTENTION_BASES[shape[1]]
    if detect_kind(tensors) == "textual_inversion":
        widths = {shape[-1] for _, shape in tensors.values() if shape}
        if len(widths) == 1 and (width := widths.pop()) in _CROSS_ATTENTION_BASES:
            return _CROSS_ATTENTION_BASES[width]
    return None


def base_and_kind_from_metadata(metadata: Mapping[str, str]) -> tuple[str | None, str | None]:
    """ModelSpec's `architecture` (e.g. `stable-diffusion-xl-v1-base/lora`) first, then kohya's version key."""
    base = kind = None
    architecture = metadata.get("modelspec.architecture", "").lower()
    if architecture:
        family, _, adapter = architecture.partition("/")
        if "pq-nano" in family or "pqnano" in family:
            base = "pq-nano"
        elif "xl" in family:
            base = "sdxl"
        elif "v2" in family:
            base = "sd21"
        elif "stable-diffusion-v1" in family:
            base = "sd15"
        kind = {"lora": "lora", "lycoris": "lora", "textual-inversion": "textual_inversion"}.get(adapter)
        if not adapter and base is not None:
            kind = "dreambooth"
    version = metadata.get("ss_base_model_version", "").lower()
    if base is None and version:
        if "pq-nano" in version or "pqnano" in version:
            base = "pq-nano"
        elif "xl" in version:
            base = "sdxl"
        elif version.startswith("sd_v2") or version.startswith("sd_2"):
            base = "sd21"
        elif version.startswith("sd_v1") or version.startswith("sd_1"):
            base = "sd15"
    if kind is None and ("ss_network_module" in metadata or "lora_adapter_metadata" in metadata):
        kind = "lora"
    return base, kind


def _json_hint(text: str | None) -> Any:
    """A JSON-valued header key (kohya's `ss_tag_frequency`) is only a prefill hint: junk, or JSON
    nested past the limits, is ignored rather than refusing the checkpoint."""
    try:
        return parse_json(text, "ss_tag_frequency") if text else None
    except MetadataRefused:
        return None


def _timestamp(value: str | None) -> str | None:
    """kohya writes Unix seconds; ModelSpec writes ISO-8601 (sometimes just a date). A value that is
    not a date a checkpoint can have (`inf`, year 9999, before 1970) is ignored."""
    if not value:
        return None
    try:
        moment = datetime.fromtimestamp(float(value), tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        from dateutil import parser

        try:
            moment = parser.isoparse(value)
            moment = moment.astimezone(timezone.utc) if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
        except (ValueError, OverflowError):
            return None
    return moment.isoformat() if plausible_date(moment) else None


def _tags_by_frequency(tag_frequency: Any) -> list[str]:
    """Caption tags by total count; entries of the wrong type (a list, a string count) are skipped."""
    counts: dict[str, float] = {}
    if isinstance(tag_frequency, dict):
        for tags in tag_frequency.values():
            if isinstance(tags, dict):
                for tag, count in tags.items():
                    if isinstance(count, (int, float)) and not isinstance(count, bool) and 0 <= count < 1e12:
                        counts[tag.strip()] = counts.get(tag.strip(), 0) + count
    return [tag for tag, _ in sorted(counts.items(), key=lambda item: -item[1]) if tag]


def prefill(header: SafetensorsHeader, path: Path) -> dict[str, Any]:
    """A context tuple prefilled from the header: ModelSpec keys first, kohya `ss_*` keys next, shapes last."""
    md = header.metadata
    base, kind = base_and_kind_from_metadata(md)
    tags = _tags_by_frequency(_json_hint(md.get("ss_tag_frequency")))
    triggers = [t.strip() for t in md.get("modelspec.trigger_phrase", "").split(",") if t.strip()]
    if not triggers and tags:
        triggers = tags[:1]  # kohya's most frequent caption tag is, by convention, the trigger word
    subject_types = [t.strip() for t in md.get("modelspec.tags", "").split(",") if t.strip()]
    if not subject_types:
        subject_types = tags[1:4]
    stem = md.get("ss_output_name") or path.stem
    entry: dict[str, Any] = {
        "id": stem,
        "triggers": triggers or [f"<{stem}>"],
        "subject_types": subject_types,
        "description": md.get("modelspec.description") or md.get("modelspec.title") or "",
        "created_at": _timestamp(md.get("modelspec.date"))
        or _timestamp(md.get("ss_training_started_at"))
        or datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc).isoformat(),
        "kind": kind or detect_kind(header.tensors),
        "base_model": base or detect_base_model(header.tensors),
    }
    return {key: value for key, value in entry.items() if value is not None and value != []}


def thumbnail_bytes(metadata: Mapping[str, str]) -> bytes | None:
    """ModelSpec's `modelspec.thumbnail` is a `data:image/...;base64,` URI; return its decoded bytes.

    The MIME subtype is ignored: it is whatever the file's author wrote. What the bytes are is decided
    by decoding them (`personalq.store.images.clean_image`), which also picks the stored suffix.
    """
    uri = metadata.get("modelspec.thumbnail", "")
    if not uri.startswith("data:") or ";base64," not in uri:
        return None
    _, _, payload = uri.partition(";base64,")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageRefused("modelspec.thumbnail: not valid base64") from None
