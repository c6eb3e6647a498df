"""The SQL catalog, the store's source of truth: checkpoint rows, their list values, the revision
counter and the description-embedding cache, read and written in bulk (Core statements, not ORM
objects: 100k rows must load in seconds). `RepoStore` decides when; this module knows how.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, create_engine, select

from personalq.protocols import Embedder
from personalq.store import migrations
from personalq.store.card import LIST_FIELDS, CheckpointCard, to_utc
from personalq.store.errors import DuplicateError, StoreError
from personalq.store.intake import Prepared
from personalq.store.tables import (
    LIST_VALUE_FIELDS,
    CheckpointRow,
    CheckpointValue,
    DescriptionEmbedding,
    StoreRevision,
)


def connect(database_url: str) -> Engine:
    """The catalog's engine, its schema migrated to the newest revision (which also starts the revision counter)."""
    # The app serves requests from worker threads; sessions are short and never shared between them.
    sqlite = {"connect_args": {"timeout": 60, "check_same_thread": False}}
    engine = create_engine(database_url, **(sqlite if database_url.startswith("sqlite") else {}))
    try:
        migrations.upgrade(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def revision(engine: Engine) -> int:
    with Session(engine) as session:
        return session.get(StoreRevision, 1).revision


def bump_revision(session: Session) -> None:
    counter = session.get(StoreRevision, 1)
    counter.revision += 1
    session.add(counter)


def count(engine: Engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(CheckpointRow)).one()


def filtered_ids(engine: Engine, category: str | None, style: str | None, created_from: datetime | date | str | None,
                 created_to: datetime | date | str | None, text: str | None) -> list[str]:
    """Ids matching every given filter (case-insensitive), oldest created first; a date-only `created_to` includes that day."""
    stmt = select(CheckpointRow.id)
    if category:
        stmt = stmt.where(func.lower(CheckpointRow.category) == category.strip().lower())
    if style:
        styled = select(CheckpointValue.checkpoint_id).where(
            CheckpointValue.field == "style_tag", func.lower(CheckpointValue.value) == style.strip().lower()
        )
        stmt = stmt.where(col(CheckpointRow.id).in_(styled))
    if created_from is not None:
        stmt = stmt.where(CheckpointRow.created_at >= to_utc(created_from))
    if created_to is not None:
        if isinstance(created_to, date) and not isinstance(created_to, datetime):
            stmt = stmt.where(CheckpointRow.created_at < to_utc(created_to + timedelta(days=1)))
        else:
            stmt = stmt.where(CheckpointRow.created_at <= to_utc(created_to))
    if text:
        mentioned = select(CheckpointValue.checkpoint_id).where(col(CheckpointValue.value).icontains(text, autoescape=True))
        stmt = stmt.where(
            or_(
                col(CheckpointRow.description).icontains(text, autoescape=True),
                col(CheckpointRow.id).icontains(text, autoescape=True),
                col(CheckpointRow.id).in_(mentioned),
            )
        )
    stmt = stmt.order_by(CheckpointRow.created_at, CheckpointRow.id)
    with Session(engine) as session:
        return list(session.exec(stmt))


def _list_values(rows) -> dict[str, dict[str, list[str]]]:
    """(id, field, value) rows, in position order -> id -> field -> values."""
    lists: dict[str, dict[str, list[str]]] = {}
    for checkpoint_id, name, value in rows:
        own = lists.get(checkpoint_id)
        if own is None:
            own = lists[checkpoint_id] = {}
        items = own.get(name)
        if items is None:
            own[name] = [value]
        else:
            items.append(value)
    return lists


def read_cards(engine: Engine, locate: Callable[[str], Path], ids: Sequence[str] | None = None) -> dict[str, CheckpointCard]:
    """Cards by id, in the order they were added; datetimes come back tz-aware UTC from `UTCDateTime`.

    `locate` turns a stored address into the local path the card names (the store's file place decides)."""
    columns = (
        CheckpointRow.id, CheckpointRow.description, CheckpointRow.created_at, CheckpointRow.version,
        CheckpointRow.last_used_at, CheckpointRow.category, CheckpointRow.base_model, CheckpointRow.kind,
        CheckpointRow.file_path, CheckpointRow.sha256, CheckpointRow.size_bytes, CheckpointRow.raw_metadata,
        CheckpointRow.added_at, CheckpointRow.updated_at,
    )
    rows_stmt = select(*columns).order_by(CheckpointRow.added_at, CheckpointRow.id)
    values_stmt = select(CheckpointValue.checkpoint_id, CheckpointValue.field, CheckpointValue.value).order_by(
        CheckpointValue.checkpoint_id, CheckpointValue.field, CheckpointValue.position
    )
    if ids is not None:
        rows_stmt = rows_stmt.where(col(CheckpointRow.id).in_(list(ids)))
        values_stmt = values_stmt.where(col(CheckpointValue.checkpoint_id).in_(list(ids)))
    with engine.connect() as connection:
        rows = connection.execute(rows_stmt).all()
        lists = _list_values(connection.execute(values_stmt).all())
    empty: dict[str, list[str]] = {}
    cards = {}
    for (id_, description, created, version, used, category, base, kind, file_path, sha, size, raw, added, updated) in rows:
        own = lists.get(id_, empty)
        cards[id_] = CheckpointCard(
            id_, own.get("trigger", []), own.get("subject_type", []), own.get("style_tag", []), description, created,
            version, own.get("environment", []), used, category, base, kind, locate(file_path) if file_path else None,
            sha, size, [locate(p) for p in own["preview"]] if "preview" in own else [], raw or {}, added, updated,
        )
    return cards


def refuse_duplicates(engine: Engine, prepared: Prepared) -> None:
    """`DuplicateError` for weights already stored, `StoreError` for an id already taken."""
    with Session(engine) as session:
        if prepared.sha256 is not None:
            same = session.exec(select(CheckpointRow.id).where(CheckpointRow.sha256 == prepared.sha256)).first()
            if same is not None:
                raise DuplicateError(f"duplicate SHA-256: the same weights are already in the store as {same!r}")
        if session.get(CheckpointRow, prepared.context.id) is not None:
            raise StoreError(f"duplicate id {prepared.context.id!r}: already in the catalog (remove it first or choose another id)")


def row_of(item: Prepared, now: datetime) -> dict[str, Any]:
    c = item.context
    return {
        "id": c.id,
        "description": c.description,
        "created_at": c.created_at,
        "version": c.version,
        "last_used_at": c.last_used_at,
        "category": c.category or c.subject_types[0],
        "base_model": c.base_model,
        "kind": c.kind,
        "file_path": item.stored_file,
        "sha256": item.sha256,
        "size_bytes": item.size_bytes,
        "raw_metadata": item.raw_metadata,
        "added_at": now,
        "updated_at": now,
    }


def values_of(item: Prepared, names: Sequence[str] = (*LIST_FIELDS, "previews")) -> list[dict[str, Any]]:
    lists = {name: getattr(item.context, name) for name in LIST_FIELDS} | {"previews": item.stored_previews}
    return [
        {"checkpoint_id": item.context.id, "field": LIST_VALUE_FIELDS[name], "position": i, "value": value}
        for name in names
        for i, value in enumerate(lists[name])
    ]


def stored_file_paths(engine: Engine) -> list[tuple[str, str]]:
    with Session(engine) as session:
        return list(session.exec(select(CheckpointRow.id, CheckpointRow.file_path).where(col(CheckpointRow.file_path).is_not(None))))


def referenced_files(engine: Engine) -> dict[str, list[str]]:
    """Checkpoint id -> every file path (relative to the home) its row names: the checkpoint and its previews."""
    referenced: dict[str, list[str]] = {}
    for checkpoint_id, path in stored_file_paths(engine):
        referenced.setdefault(checkpoint_id, []).append(path)
    with Session(engine) as session:
        previews = session.exec(
            select(CheckpointValue.checkpoint_id, CheckpointValue.value).where(CheckpointValue.field == LIST_VALUE_FIELDS["previews"])
        )
        for checkpoint_id, path in previews:
            referenced.setdefault(checkpoint_id, []).append(path)
    return referenced


def descriptions(engine: Engine) -> dict[str, str]:
    with Session(engine) as session:
        return dict(session.exec(select(CheckpointRow.id, CheckpointRow.description)).all())


def cached_vectors(engine: Engine, embedder: Embedder, texts: Sequence[str], progress: Any = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Embeddings for `texts`, from the cache where present; the new ones come back as cache rows to insert."""
    name = embedder.name
    hashes = [text_sha(t) for t in texts]
    cached: dict[str, np.ndarray] = {}
    wanted = list(dict.fromkeys(hashes))
    with Session(engine) as session:
        for start in range(0, len(wanted), 2000):
            chunk = wanted[start : start + 2000]
            stmt = select(DescriptionEmbedding.text_sha256, DescriptionEmbedding.vector).where(
                DescriptionEmbedding.embedder == name, col(DescriptionEmbedding.text_sha256).in_(chunk)
            )
            for text_hash, blob in session.exec(stmt):
                cached[text_hash] = np.frombuffer(blob, dtype=np.float32)
    missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in cached}
    new_rows = []
    if missing:
        missing_hashes, missing_texts = list(missing), list(missing.values())
        step = 256
        for start in range(0, len(missing_texts), step):
            vectors = embedder.embed(missing_texts[start : start + step])
            for text_hash, vector in zip(missing_hashes[start : start + step], vectors, strict=True):
                vector = np.asarray(vector, dtype=np.float32)
                cached[text_hash] = vector
                new_rows.append({"embedder": name, "text_sha256": text_hash, "vector": vector.tobytes()})
            if progress is not None:
                progress.set_postfix_str(f"embedded {min(start + step, len(missing_texts))}/{len(missing_texts)}")
    dim = len(next(iter(cached.values()))) if cached else 0
    matrix = np.stack([cached[h] for h in hashes]) if hashes else np.zeros((0, dim), dtype=np.float32)
    return matrix, new_rows


def addresses_of(engine: Engine, checkpoint_id: str) -> list[str]:
    """The file and preview addresses one checkpoint's row names; `KeyError` when there is no such row."""
    with Session(engine) as session:
        row = session.get(CheckpointRow, checkpoint_id)
        if row is None:
            raise KeyError(checkpoint_id)
        previews = session.exec(select(CheckpointValue.value).where(
            CheckpointValue.checkpoint_id == checkpoint_id, CheckpointValue.field == LIST_VALUE_FIELDS["previews"]
        )).all()
    return [address for address in [row.file_path, *previews] if address]


def still_named(engine: Engine, addresses: Sequence[str]) -> set[str]:
    """Those of `addresses` that some row names (as its file or a preview): a shared file must outlive none of them."""
    wanted = sorted(set(addresses))
    if not wanted:
        return set()
    with Session(engine) as session:
        files = session.exec(select(CheckpointRow.file_path).where(col(CheckpointRow.file_path).in_(wanted))).all()
        previews = session.exec(select(CheckpointValue.value).where(
            CheckpointValue.field == LIST_VALUE_FIELDS["previews"], col(CheckpointValue.value).in_(wanted)
        )).all()
    return set(files) | set(previews)
