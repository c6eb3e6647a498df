"""What comes into the store, checked before anything is written: a file with its sidecar and previews,
or a metadata-only catalog entry, turned into one `Prepared` checkpoint or refused with one line.

Every check that can refuse runs here (header, metadata limits, context tuple, weights against the
base, previews decoded whole); `RepoStore` then commits a `Prepared` (files, rows, vectors) or undoes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from personalq.protocols import BaseShapes
from personalq.store.card import ContextTuple
from personalq.store.errors import StoreError
from personalq.store.images import CleanImage, clean_image, clean_image_file
from personalq.store.metadata import check_structure, load_yaml_file, trimmed
from personalq.store.safetensors_file import prefill, read_header, thumbnail_bytes
from personalq.store.weights import base_shapes, validate_weights


@dataclass
class Prepared:
    """One validated checkpoint, ready to be committed; file copies happen at commit time."""

    context: ContextTuple
    raw_metadata: dict
    source_file: Path | None = None  # copied into the store
    stored_file: str | None = None  # the file's address in the store's file place (set when written, or already there)
    sha256: str | None = None
    size_bytes: int | None = None
    preview_images: list[CleanImage] = field(default_factory=list)  # re-encoded, written at commit
    stored_previews: list[str] = field(default_factory=list)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_sidecar(meta: dict | Path | str | None) -> dict[str, Any]:
    """A sidecar is YAML or JSON (JSON is YAML) holding context-tuple keys, parsed within the limits."""
    if meta is None:
        return {}
    if isinstance(meta, dict):
        return dict(check_structure(meta, "metadata"))
    path = Path(meta)
    data = load_yaml_file(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise StoreError(f"metadata {path.name}: must be a mapping of context-tuple keys, got {type(data).__name__}")
    return data


def jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def file_metadata(path: Path, meta: dict | Path | str | None = None) -> dict[str, Any]:
    """The context tuple a file would be added with (header prefill, sidecar wins), without adding it."""
    header = read_header(path)
    merged = prefill(header, path) | load_sidecar(meta)
    merged["raw_metadata"] = trimmed(header.metadata)
    return jsonable(merged)


def prepare_file(bases: Mapping[str, BaseShapes], path: Path, meta: dict | Path | str | None,
                 previews: Sequence[Path], refuse_duplicates: Callable[[Prepared], None]) -> Prepared:
    """A `.safetensors` file with its sidecar and previews; duplicates are refused before the (slower) weight checks."""
    header = read_header(path)
    sidecar = load_sidecar(meta)
    context = ContextTuple.parse(prefill(header, path) | sidecar)
    prepared = Prepared(
        context=context,
        raw_metadata=trimmed(header.metadata),
        source_file=path,
        sha256=file_sha256(path),
        size_bytes=header.size_bytes,
    )
    refuse_duplicates(prepared)
    base = bases.get(context.base_model or "") or base_shapes(context.base_model)
    validate_weights(path, header.tensors, context.kind, base)
    prepared.preview_images = [clean_image_file(preview) for preview in previews]
    if not previews and (thumbnail := thumbnail_bytes(header.metadata)) is not None:
        prepared.preview_images.append(clean_image(thumbnail, "modelspec.thumbnail"))
    return prepared


def prepare_entry(existing: Callable[[Any, str, bool], tuple[str, Path]], entry: dict[str, Any]) -> Prepared:
    """A catalog entry; the files it names must already lie in the store's file place (and previews decode whole).

    `existing(value, what, checkpoint)` is the place's `FilePlace.existing`: (address, local path) or refused."""
    context = ContextTuple.parse(entry)
    extras = context.extras
    prepared = Prepared(context=context, raw_metadata=jsonable({k: v for k, v in extras.items() if k not in ("file", "previews", "sha256", "size_bytes")}))
    if extras.get("file") is not None:
        prepared.stored_file, stored = existing(extras["file"], "file", True)
        prepared.sha256 = file_sha256(stored)
        prepared.size_bytes = stored.stat().st_size
    previews = extras.get("previews") or []
    if not isinstance(previews, list):
        raise StoreError("previews: expected a list of paths")
    for value in previews:
        address, preview = existing(value, "preview", False)
        clean_image_file(preview)  # decodes whole: a catalog may only point at real images
        prepared.stored_previews.append(address)
    return prepared
