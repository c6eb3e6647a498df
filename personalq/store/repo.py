"""`RepoStore`: the catalog, the checkpoint files and the two indexes, kept consistent.

The SQL catalog is the source of truth. Every change runs in one SQL transaction, and the Chroma
update happens inside it, before the commit. If anything fails, the transaction rolls back, the new
Chroma entries are deleted and the copied files are unlinked, so a refused or failed add leaves the
store exactly as it was. Files are copied under a temporary name, fsynced, then renamed. A crash
can leave at most an unreferenced file, never a catalog row without its file. Opening a store
compares Chroma with the catalog and repairs any difference.

Layout under `home`: `catalog.db` (default SQLite catalog), `chroma/`, `checkpoints/<id>.safetensors`,
`previews/<id>/<n>.<ext>`. With a shared file place (`PERSONALQ_FILES_URL`, see `shared_files`) the
checkpoint files and previews live there instead, by content hash, for every node of a cluster.

This module decides the order of things and holds the write lock; the parts live beside it:
`intake` (checks before anything is written), `catalog` (SQL rows, revision, embedding cache),
`files` (the place checkpoint and preview files live in), `indexes` (Chroma and BM25), `consistency`
(files vs rows).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout
from sqlalchemy import delete, insert
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select
from tqdm import tqdm

from personalq.atomic_write import atomic_write
from personalq.config import personalq_home
from personalq.protocols import BaseShapes, Embedder
from personalq.store import catalog
from personalq.store.card import CONTEXT_FIELDS, LIST_FIELDS, CheckpointCard, ContextTuple, to_utc
from personalq.store.consistency import ConsistencyReport
from personalq.store.embedder import default_embedder
from personalq.store.errors import ConflictError, DuplicateError, ImportReport, StoreError, one_line, source_label
from personalq.store.files import FilePlace, HomeFiles
from personalq.store.indexes import DenseIndex, SparseIndex
from personalq.store.intake import Prepared, file_metadata, prepare_entry, prepare_file
from personalq.store.metadata import parse_json
from personalq.store.safetensors_file import PICKLE_SUFFIXES, pickle_refusal
from personalq.store.shared_files import file_place
from personalq.store.tables import LIST_VALUE_FIELDS, BrokenCheckpoint, CheckpointRow, CheckpointValue, DescriptionEmbedding

__all__ = ["ConflictError", "DuplicateError", "RepoStore"]

_SIDECAR_SUFFIXES = (".yaml", ".yml", ".json")
_PREVIEW_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
_BATCH = 512
WRITE_LOCK_TIMEOUT_S = 120.0


def _now() -> datetime:
    return datetime.now(timezone.utc)


class RepoStore:
    """A user's repository of personalized checkpoints: catalog, files, dense and sparse indexes."""

    def __init__(self, home: Path, database_url: str, embedder: Embedder, bases: Mapping[str, BaseShapes] | None = None,
                 files: FilePlace | None = None):
        self.home = home
        self._files = files if files is not None else HomeFiles(home)
        self.bases = dict(bases or {})  # base name -> shapes, over the defaults: the base this owner serves
        self.database_url = database_url
        self._embedder = embedder
        self._engine = catalog.connect(database_url)
        self._cards_cache: tuple[int, dict[str, CheckpointCard]] | None = None
        self._sparse_cache: tuple[int, SparseIndex] | None = None
        self._dense = DenseIndex(home / "chroma", os.environ.get("PERSONALQ_CHROMA_URL"))
        # One lock file per file place (the home's, or a shared folder's) serializes every write across
        # threads and processes (flock locks belong to an open file, so two threads of one process
        # exclude each other too).
        self._write_lock = FileLock(str(self._files.lock_path), timeout=WRITE_LOCK_TIMEOUT_S)

    @classmethod
    def open(
        cls, home: Path | str | None = None, database_url: str | None = None, embedder: Embedder | None = None,
        repair_files: bool = True, bases: Mapping[str, BaseShapes] | None = None, files_url: str | None = None,
    ) -> RepoStore:
        """Open (creating if needed) the store under `home` and repair indexes that disagree with the catalog.

        Unless `repair_files` is False (`personalq repo check` wants to see them), files a crash left
        without a row are removed and rows whose files are gone are dropped. `bases` names the base
        models uploads are validated against where they differ from the defaults (`weights.served_bases`).
        `files_url` (default `PERSONALQ_FILES_URL`) is a folder or fsspec URL every node shares, where
        checkpoint files and previews are kept by content hash instead of under the home.
        """
        home = Path(home).expanduser().resolve() if home is not None else personalq_home()
        home.mkdir(parents=True, exist_ok=True)
        url = database_url or os.environ.get("PERSONALQ_DATABASE_URL") or f"sqlite:///{home / 'catalog.db'}"
        files = file_place(home, files_url or os.environ.get("PERSONALQ_FILES_URL"))
        store = cls(home, url, embedder or default_embedder(), bases, files)
        if repair_files:
            store._repair_files_after_crash()
        store.repair()
        return store

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the store's write lock: files and rows of one change are written by one writer at a time."""
        try:
            with self._write_lock:
                yield
        except Timeout:
            raise ConflictError(
                f"the store is busy: another add or import held its write lock for over {WRITE_LOCK_TIMEOUT_S:.0f} s; try again"
            ) from None

    def close(self) -> None:
        self._dense.close()
        self._engine.dispose()

    def __enter__(self) -> RepoStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def files_root(self) -> Path:
        """The local folder cards' file paths lie under: the home, a shared folder, or this node's copies of a remote place."""
        return self._files.local_root

    @property
    def revision(self) -> int:
        return catalog.revision(self._engine)

    # ------------------------------------------------------------------ reading

    def cards(self) -> list[CheckpointCard]:
        """Every checkpoint, oldest added first; cached until the catalog's revision changes."""
        return list(self._card_map().values())

    def get(self, checkpoint_id: str) -> CheckpointCard:
        """One card, its files on this node (fetched from a remote file place once) for a renderer to open."""
        card = self._card(checkpoint_id)
        self._fetch(card)
        return card

    def _card(self, checkpoint_id: str) -> CheckpointCard:
        cached = self._cards_cache
        if cached is not None and cached[0] == self.revision:
            return cached[1][checkpoint_id]
        found = catalog.read_cards(self._engine, self._locate, [checkpoint_id])
        if checkpoint_id not in found:
            raise KeyError(checkpoint_id)
        return found[checkpoint_id]

    def _locate(self, address: str) -> Path:
        return self._files.local_root / address

    def _fetch(self, card: CheckpointCard) -> None:
        """Bring a remote place's files of `card` to this node; one that cannot come stays missing, as a
        deleted file would, and the renderer refuses it in one line."""
        for path in [card.file_path, *card.previews]:
            if path is not None and not path.is_file():
                try:
                    self._files.local_copy(path.relative_to(self._files.local_root).as_posix())
                except (OSError, ValueError, StoreError):
                    pass

    def __contains__(self, checkpoint_id: object) -> bool:
        try:
            self._card(str(checkpoint_id))
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return catalog.count(self._engine)

    def list(
        self,
        category: str | None = None,
        style: str | None = None,
        created_from: datetime | date | str | None = None,
        created_to: datetime | date | str | None = None,
        text: str | None = None,
    ) -> list[CheckpointCard]:
        """Checkpoints matching every given filter (case-insensitive), oldest created first.

        A date-only `created_to` includes that whole day.
        """
        ids = catalog.filtered_ids(self._engine, category, style, created_from, created_to, text)
        cards = self._card_map()
        return [cards[i] for i in ids if i in cards]

    def _card_map(self) -> dict[str, CheckpointCard]:
        revision = self.revision
        if self._cards_cache is None or self._cards_cache[0] != revision:
            self._cards_cache = (revision, catalog.read_cards(self._engine, self._locate))
        return self._cards_cache[1]

    # ------------------------------------------------------------------ search

    def dense_search(self, query: str, k: int, ids: Collection[str] | None = None) -> list[tuple[str, float]]:
        """Best-first (id, cosine similarity) of the query against checkpoint descriptions."""
        if k <= 0 or (ids is not None and not ids):
            return []
        return self._dense.query(self.embedder.embed([query])[0], k, ids)

    def sparse_search(self, query: str, k: int, ids: Collection[str] | None = None) -> list[tuple[str, float]]:
        """Best-first (id, BM25 score) of the query's words against checkpoint cards."""
        revision = self.revision
        if self._sparse_cache is None or self._sparse_cache[0] != revision:
            self._sparse_cache = (revision, SparseIndex(self.cards()))
        return self._sparse_cache[1].query(query, k, ids)

    # ------------------------------------------------------------------ adding

    def read_file_metadata(self, path: Path | str, meta: dict | Path | str | None = None) -> dict[str, Any]:
        """The context tuple a file would be added with (header prefill, sidecar wins), without adding it."""
        return file_metadata(Path(path).expanduser(), meta)

    def add(self, path: Path | str, meta: dict | Path | str | None = None, previews: Sequence[Path | str] = ()) -> CheckpointCard:
        """Copy a `.safetensors` checkpoint into the store with its context tuple and previews.

        Raises `StoreError` (one line) and leaves the store unchanged if anything is wrong.
        """
        prepared = self._prepare_file(Path(path).expanduser(), meta, [Path(p).expanduser() for p in previews])
        self._commit([prepared])
        return self._card(prepared.context.id)

    def add_entry(self, entry: dict[str, Any]) -> CheckpointCard:
        """Add one metadata-only context tuple (a catalog JSONL line); raises `StoreError` if refused."""
        prepared = prepare_entry(self._files.existing, entry)
        self._refuse_duplicates(prepared)
        self._commit([prepared])
        return self._card(prepared.context.id)

    def _prepare_file(self, path: Path, meta: dict | Path | str | None, previews: Sequence[Path]) -> Prepared:
        return prepare_file(self.bases, path, meta, previews, self._refuse_duplicates)

    def _refuse_duplicates(self, prepared: Prepared) -> None:
        catalog.refuse_duplicates(self._engine, prepared)

    def _stage(self, session: Session, values: list[dict], cache_rows: list[dict] | None) -> None:
        """Write list values and new embedding-cache rows and bump the revision, uncommitted, so the
        caller can still update Chroma and roll everything back together."""
        if values:
            session.execute(insert(CheckpointValue), values)
        if cache_rows:
            session.execute(insert(DescriptionEmbedding), cache_rows)
        catalog.bump_revision(session)
        session.flush()

    def _commit(self, batch: Sequence[Prepared], progress: Any = None) -> None:
        """Copy files, embed, write rows and vectors; on any failure undo all of it and raise `StoreError`."""
        with self._writing():
            for item in batch:  # another thread or process may have added the same id since we prepared
                try:
                    self._refuse_duplicates(item)
                except DuplicateError:
                    raise
                except StoreError as error:
                    raise ConflictError(str(error)) from None
            self._commit_locked(batch, progress)

    def _commit_locked(self, batch: Sequence[Prepared], progress: Any) -> None:
        created: list[str] = []
        dense_ids: list[str] = []
        try:
            for item in batch:
                self._files.write(item, created)
            vectors, cache_rows = self._vectors([item.context.description for item in batch], progress)
            now = _now()
            with Session(self._engine) as session:
                # Bulk inserts (executemany): ORM objects cost seconds per thousand entries.
                session.execute(insert(CheckpointRow), [catalog.row_of(item, now) for item in batch])
                self._stage(session, [value for item in batch for value in catalog.values_of(item)], cache_rows)
                dense_ids = [item.context.id for item in batch]
                self._dense.upsert(dense_ids, vectors, [self._dense_meta(item.context.description) for item in batch])
                session.commit()
        except Exception as error:
            if dense_ids:
                try:
                    self._dense.delete(dense_ids)
                except Exception:
                    pass  # repaired on next open: Chroma ids missing from the catalog are dropped
            self._files.unwrite(created, catalog.still_named(self._engine, created))
            if isinstance(error, StoreError):
                raise
            if isinstance(error, SQLAlchemyError):
                reason = str(getattr(error, "orig", None) or error).splitlines()[0]
            else:
                reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise StoreError(f"could not add {', '.join(item.context.id for item in batch[:3])}: {reason}") from error

    def _dense_meta(self, description: str) -> dict[str, str]:
        return {"embedder": self.embedder.name, "text_sha256": catalog.text_sha(description)}

    def _vectors(self, texts: Sequence[str], progress: Any = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        return catalog.cached_vectors(self._engine, self.embedder, texts, progress)

    # ------------------------------------------------------------------ batch imports

    def import_dir(self, directory: Path | str, progress: bool = False) -> ImportReport:
        """Add every checkpoint in a folder: `name.safetensors` with `name.yaml|yml|json` and `name*.png|jpg|webp`."""
        directory = Path(directory).expanduser()
        if not directory.is_dir():
            raise StoreError(f"{directory}: not a folder")
        report = ImportReport()
        files = sorted(p for p in directory.iterdir() if p.is_file())
        checkpoints = [p for p in files if p.suffix.lower() == ".safetensors"]
        report.refused += [(str(p), pickle_refusal(p)) for p in files if p.suffix.lower() in PICKLE_SUFFIXES]
        for path in tqdm(checkpoints, desc="import", unit="file", disable=not progress):
            sidecars = [path.with_suffix(s) for s in _SIDECAR_SUFFIXES if path.with_suffix(s).is_file()]
            previews = [
                p for p in files
                if p.suffix.lower() in _PREVIEW_SUFFIXES and (p.stem == path.stem or p.stem.startswith(path.stem + "."))
            ]
            try:
                card = self.add(path, meta=sidecars[0] if sidecars else None, previews=previews)
            except DuplicateError as error:
                report.skipped.append((str(path), str(error)))
            except StoreError as error:
                report.refused.append((str(path), str(error)))
            except Exception as error:  # a bug, not a refusal: report it and go on with the other files
                report.refused.append((str(path), one_line(f"could not add ({type(error).__name__}: {error})")))
            else:
                report.added.append(card.id)
        return report

    def load_catalog(self, jsonl_path: Path | str, progress: bool = False) -> ImportReport:
        """Add the metadata-only entries of a catalog JSONL file, in batches; bad lines are refused, not fatal.

        An entry identical to the stored one is skipped, so loading the same catalog twice is harmless.
        """
        jsonl_path = Path(jsonl_path).expanduser()
        try:
            lines = jsonl_path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise StoreError(f"{jsonl_path}: cannot read ({getattr(error, 'strerror', None) or error})") from None
        report = ImportReport()
        existing = self._card_map()
        seen: dict[str, Prepared] = {}
        pending: list[tuple[str, Prepared]] = []
        bar = tqdm(total=len(lines), desc="load-catalog", unit="entry", disable=not progress)
        for number, line in enumerate(lines, start=1):
            label = source_label(jsonl_path.name, number)
            if not line.strip():
                bar.update(1)
                continue
            try:
                prepared = prepare_entry(self._files.existing, parse_json(line, "entry"))
                id_ = prepared.context.id
                if id_ in existing:
                    if self._same_entry(existing[id_], prepared):
                        report.skipped.append((label, f"{id_!r} is already in the catalog with the same content"))
                        bar.update(1)
                        continue
                    raise StoreError(f"duplicate id {id_!r}: already in the catalog with different content")
                if id_ in seen:
                    if self._entry_of(seen[id_]) == self._entry_of(prepared):
                        report.skipped.append((label, f"{id_!r} appears earlier in this file with the same content"))
                        bar.update(1)
                        continue
                    raise StoreError(f"duplicate id {id_!r}: appears earlier in this file with different content")
                if prepared.sha256 is not None:
                    self._refuse_duplicates(prepared)
            except StoreError as error:
                report.refused.append((label, str(error)))
                bar.update(1)
                continue
            seen[id_] = prepared
            pending.append((label, prepared))
            if len(pending) >= _BATCH:
                self._commit_batch(pending, report, bar)
                pending = []
        self._commit_batch(pending, report, bar)
        bar.close()
        return report

    def _commit_batch(self, pending: list[tuple[str, Prepared]], report: ImportReport, bar: Any) -> None:
        if not pending:
            return
        try:
            self._commit([p for _, p in pending], progress=bar)
        except StoreError as error:
            report.refused += [(label, str(error)) for label, _ in pending]
        else:
            report.added += [p.context.id for _, p in pending]
        bar.update(len(pending))

    def _same_entry(self, card: CheckpointCard, prepared: Prepared) -> bool:
        stored = card.to_catalog_entry()  # context fields only: no file path is compared
        incoming = self._entry_of(prepared)
        return {k: stored.get(k) for k in CONTEXT_FIELDS} == {k: incoming.get(k) for k in CONTEXT_FIELDS}

    @staticmethod
    def _entry_of(prepared: Prepared) -> dict[str, Any]:
        c = prepared.context
        data = c.model_dump(mode="json", include=set(CONTEXT_FIELDS))
        data["category"] = c.category or c.subject_types[0]
        for key in ("created_at", "last_used_at"):
            moment = getattr(c, key)
            data[key] = None if moment is None else moment.isoformat().replace("+00:00", "Z")
        return data

    def export_catalog(self, path: Path | str) -> int:
        """Write the catalog as JSONL (file paths relative to the store); returns the number of entries."""
        cards = self.cards()
        lines = [json.dumps(card.to_catalog_entry(self.files_root), ensure_ascii=False) + "\n" for card in cards]
        atomic_write(Path(path).expanduser(), [line.encode("utf-8") for line in lines])
        return len(cards)

    # ------------------------------------------------------------------ changing and removing

    def update(self, checkpoint_id: str, **fields: Any) -> CheckpointCard:
        """Change context-tuple fields of one checkpoint; the indexes follow in the same transaction."""
        unknown = set(fields) - (set(CONTEXT_FIELDS) - {"id"})
        if unknown:
            raise StoreError(f"cannot update {', '.join(sorted(unknown))}: only context-tuple fields other than id")
        card = self._card(checkpoint_id)
        merged = {k: v for k, v in card.to_catalog_entry().items() if k in CONTEXT_FIELDS}
        if "subject_types" in fields and "category" not in fields and card.category == card.subject_types[0]:
            merged.pop("category")  # the category followed the first subject type; keep it that way
        context = ContextTuple.parse(merged | fields)
        vectors = cache_rows = None
        if context.description != card.description:
            vectors, cache_rows = self._vectors([context.description])
        with self._writing():
            with Session(self._engine) as session:
                row = session.get(CheckpointRow, checkpoint_id)
                row.description = context.description
                row.created_at = context.created_at
                row.version = context.version
                row.last_used_at = context.last_used_at
                row.category = context.category or context.subject_types[0]
                row.base_model = context.base_model
                row.kind = context.kind
                row.updated_at = _now()
                session.add(row)
                session.exec(
                    delete(CheckpointValue).where(
                        CheckpointValue.checkpoint_id == checkpoint_id, CheckpointValue.field != LIST_VALUE_FIELDS["previews"]
                    )
                )
                self._stage(session, catalog.values_of(Prepared(context=context, raw_metadata={}), names=LIST_FIELDS), cache_rows)
                if vectors is not None:
                    self._dense.upsert([checkpoint_id], vectors, [self._dense_meta(context.description)])
                try:
                    session.commit()
                except Exception:
                    if vectors is not None:  # put the old vector back
                        old, _ = self._vectors([card.description])
                        self._dense.upsert([checkpoint_id], old, [self._dense_meta(card.description)])
                    raise
        return self._card(checkpoint_id)

    def mark_broken(self, checkpoint_id: str, reason: str) -> None:
        """Record why a checkpoint failed to attach or render; serving refuses it until it is fixed."""
        with Session(self._engine) as session:
            if session.get(CheckpointRow, checkpoint_id) is None:
                raise KeyError(checkpoint_id)
            session.merge(BrokenCheckpoint(checkpoint_id=checkpoint_id, reason=one_line(reason), since=_now()))
            session.commit()

    def clear_broken(self, checkpoint_id: str) -> None:
        """Serve the checkpoint again (its file was fixed in place, or the base model changed)."""
        with Session(self._engine) as session:
            session.exec(delete(BrokenCheckpoint).where(BrokenCheckpoint.checkpoint_id == checkpoint_id))
            session.commit()

    def broken(self) -> dict[str, str]:
        """Checkpoint id -> the one-line reason it is marked broken."""
        with Session(self._engine) as session:
            return dict(session.exec(select(BrokenCheckpoint.checkpoint_id, BrokenCheckpoint.reason)).all())

    def mark_used(self, checkpoint_id: str, when: datetime | None = None) -> None:
        """Record a use (default: now), which requests like "the one I used yesterday" rely on."""
        with Session(self._engine) as session:
            row = session.get(CheckpointRow, checkpoint_id)
            if row is None:
                raise KeyError(checkpoint_id)
            row.last_used_at = to_utc(when) if when is not None else _now()
            session.add(row)
            catalog.bump_revision(session)
            session.commit()

    def remove(self, checkpoint_id: str) -> None:
        """Delete the catalog row, both index entries and the files no other row names (rows first: a
        renderer that then finds the file gone finds the row gone too, and says it was removed)."""
        with self._writing():
            addresses = catalog.addresses_of(self._engine, checkpoint_id)
            self._delete_rows([checkpoint_id])
            self._files.release(checkpoint_id, addresses, catalog.still_named(self._engine, addresses))

    def _delete_rows(self, checkpoint_ids: Sequence[str]) -> None:
        """Drop catalog rows and their vectors (a vector left by a failure is dropped on the next open)."""
        with Session(self._engine) as session:
            session.exec(delete(CheckpointValue).where(col(CheckpointValue.checkpoint_id).in_(list(checkpoint_ids))))
            session.exec(delete(BrokenCheckpoint).where(col(BrokenCheckpoint.checkpoint_id).in_(list(checkpoint_ids))))
            session.exec(delete(CheckpointRow).where(col(CheckpointRow.id).in_(list(checkpoint_ids))))
            catalog.bump_revision(session)
            session.commit()
        self._dense.delete(list(checkpoint_ids))

    # ------------------------------------------------------------------ files and rows agree

    def check_files(self, repair: bool = False) -> ConsistencyReport:
        """Orphan files (no row), half-written `.tmp-*` files and rows whose files are gone; with
        `repair`, remove the files and drop those rows (or just the missing previews)."""
        with self._writing():
            return self._check_files_locked(repair)

    def _check_files_locked(self, repair: bool) -> ConsistencyReport:
        report = self._files.compare(catalog.referenced_files(self._engine))  # rows first, then the listing
        if repair and not report.ok:
            self._files.remove(report.orphan_files + report.temporary_files)
            rows = dict(catalog.stored_file_paths(self._engine))
            gone_rows = sorted({i for i, path in report.missing_files if rows.get(i) == path})
            gone_previews = [(i, path) for i, path in report.missing_files if i not in gone_rows]
            if gone_previews:
                with Session(self._engine) as session:
                    for checkpoint_id, path in gone_previews:
                        session.exec(delete(CheckpointValue).where(
                            CheckpointValue.checkpoint_id == checkpoint_id,
                            CheckpointValue.field == LIST_VALUE_FIELDS["previews"],
                            CheckpointValue.value == path,
                        ))
                    catalog.bump_revision(session)
                    session.commit()
            if gone_rows:
                self._delete_rows(gone_rows)
            report.repaired = True
        return report

    def _repair_files_after_crash(self) -> None:
        """On open: if no writer holds the lock, whatever disagrees was left by a crash; repair it."""
        try:
            with self._write_lock.acquire(timeout=0):
                self._check_files_locked(repair=True)
        except Timeout:
            pass  # a writer is running: its files are not orphans, and it will commit or clean up

    # ------------------------------------------------------------------ index maintenance

    def repair(self) -> dict[str, int]:
        """Make Chroma agree with the catalog: add missing or stale vectors, drop extra ones."""
        expected = catalog.descriptions(self._engine)
        stored = self._dense.entries()
        name = self.embedder.name
        if any(embedder != name for embedder, _ in stored.values()):
            self._dense.clear()  # another embedder (maybe another width) wrote these: start over
            stored = {}
        extra = [id_ for id_ in stored if id_ not in expected]
        stale = [id_ for id_, text in expected.items() if stored.get(id_) != (name, catalog.text_sha(text))]
        self._dense.delete(extra)
        self._index_dense(stale, expected)
        return {"added": len(stale), "removed": len(extra), "recreated": int(self._dense.recreated)}

    def reindex(self, progress: bool = False) -> None:
        """Rebuild both indexes from the catalog (descriptions already embedded come from the cache)."""
        expected = catalog.descriptions(self._engine)
        self._dense.clear()
        self._index_dense(list(expected), expected, progress)
        self._sparse_cache = None
        self._sparse_cache = (self.revision, SparseIndex(self.cards()))

    def _index_dense(self, ids: Sequence[str], descriptions: dict[str, str], progress: bool = False) -> None:
        with tqdm(total=len(ids), desc="reindex", unit="entry", disable=not progress or not ids) as bar:
            for start in range(0, len(ids), _BATCH * 4):
                chunk = ids[start : start + _BATCH * 4]
                texts = [descriptions[i] for i in chunk]
                vectors, cache_rows = self._vectors(texts, bar)
                if cache_rows:
                    with Session(self._engine) as session:
                        session.execute(insert(DescriptionEmbedding), cache_rows)
                        session.commit()
                self._dense.upsert(chunk, vectors, [self._dense_meta(t) for t in texts])
                bar.update(len(chunk))
