"""The two search indexes over the catalog: Chroma for description embeddings, BM25 for checkpoint cards.

Both are derived data. The catalog stays the source of truth, and `RepoStore` keeps these in step
with it. Chroma is handed our own vectors (its embedding function is disabled, so it never loads
or downloads a model of its own). Each Chroma entry records the embedder and the hash of the text it
embeds, which is how opening a store notices stale entries.

BM25 is not persisted: it is rebuilt in memory from the catalog's cards on the first sparse search
after a change (10k cards take well under a second), so it can never disagree with the catalog on
disk and opening a store stays fast.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import numpy as np

from personalq.store.card import CheckpointCard, tokenize

COLLECTION_NAME = "descriptions"
_PAGE = 5000  # ids per Chroma call; larger id lists overflow SQLite's variable limit inside chromadb


class DenseIndex:
    """A Chroma `PersistentClient` collection of L2-normalised description vectors, cosine space."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._client = None
        self._collection = None
        self.recreated = False  # True when the folder was unreadable and had to be started afresh
        self._open()

    def _open(self) -> None:
        try:
            self._connect()
        except Exception:  # a crash can leave Chroma's sqlite/HNSW files unreadable: start afresh
            self.close()
            self._forget_failed_system()
            shutil.rmtree(self.directory, ignore_errors=True)
            self.recreated = True
            self._connect()

    def _forget_failed_system(self) -> None:
        """chromadb 1.5 keeps a client that failed to start cached by path and hands it out again.

        Only this folder's entry is dropped, so other stores open in the process are untouched.
        """
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient._identifier_to_system.pop(str(self.directory), None)

    def _connect(self) -> None:
        import chromadb
        from chromadb.config import Settings

        self.directory.mkdir(parents=True, exist_ok=True)
        self._client = chromadb.PersistentClient(
            path=str(self.directory), settings=Settings(anonymized_telemetry=False, allow_reset=False)
        )
        self._collection = self._client.get_or_create_collection(
            COLLECTION_NAME, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
        self._collection.count()

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass
        self._client = self._collection = None

    def entries(self) -> dict[str, tuple[str, str]]:
        """id -> (embedder name, text hash) for every stored vector.

        Paged: chromadb 1.5 fails with "too many SQL variables" when one `get` spans ~100k entries.
        """
        found: dict[str, tuple[str, str]] = {}
        while True:
            got = self._collection.get(include=["metadatas"], limit=_PAGE, offset=len(found))
            for id_, meta in zip(got["ids"], got["metadatas"], strict=True):
                found[id_] = ((meta or {}).get("embedder", ""), (meta or {}).get("text_sha256", ""))
            if len(got["ids"]) < _PAGE:
                return found

    def dimension(self) -> int | None:
        got = self._collection.get(limit=1, include=["embeddings"])
        embeddings = got.get("embeddings")
        return None if embeddings is None or len(embeddings) == 0 else len(embeddings[0])

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[Mapping[str, str]]) -> None:
        if not ids:
            return
        batch = self._client.get_max_batch_size()
        for start in range(0, len(ids), batch):
            stop = start + batch
            self._collection.upsert(
                ids=list(ids[start:stop]), embeddings=vectors[start:stop], metadatas=[dict(m) for m in metadatas[start:stop]]
            )

    def delete(self, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), _PAGE):
            self._collection.delete(ids=list(ids[start : start + _PAGE]))

    def clear(self) -> None:
        self._client.delete_collection(COLLECTION_NAME)
        self._collection = self._client.get_or_create_collection(
            COLLECTION_NAME, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )

    def count(self) -> int:
        return self._collection.count()

    def query(self, vector: np.ndarray, k: int, ids: Collection[str] | None = None) -> list[tuple[str, float]]:
        """Best-first (id, cosine similarity)."""
        allowed = None if ids is None else list(dict.fromkeys(ids))
        size = self.count() if allowed is None else len(allowed)
        if k <= 0 or size == 0:
            return []
        vector = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        if allowed is not None:
            return self._exact(vector[0], k, allowed)
        result = self._collection.query(query_embeddings=vector, n_results=min(k, size), include=["distances"])
        return [(id_, 1.0 - float(dist)) for id_, dist in zip(result["ids"][0], result["distances"][0], strict=True)]

    def _exact(self, vector: np.ndarray, k: int, ids: Sequence[str]) -> list[tuple[str, float]]:
        """Exact cosine over the allowed ids' vectors.

        HNSW with an id filter can return fewer than k hits (seen with chromadb 1.5 on a 100-id pool),
        and candidate pools are small, so the exact answer is both right and cheap. Paged, because
        one Chroma call over tens of thousands of ids overflows its SQL variable limit.
        """
        found_ids: list[str] = []
        scores: list[np.ndarray] = []
        for start in range(0, len(ids), _PAGE):
            got = self._collection.get(ids=list(ids[start : start + _PAGE]), include=["embeddings"])
            if len(got["ids"]):
                found_ids += got["ids"]
                scores.append(np.asarray(got["embeddings"], dtype=np.float32) @ vector)
        if not found_ids:
            return []
        flat = np.concatenate(scores)
        order = np.argsort(-flat, kind="stable")[:k]
        return [(found_ids[i], float(flat[i])) for i in order]


class SparseIndex:
    """BM25 (Okapi) over checkpoint cards, built from a snapshot of the catalog."""

    def __init__(self, cards: Sequence[CheckpointCard]):
        from rank_bm25 import BM25Okapi

        self.ids = [card.id for card in cards]
        self._position = {id_: i for i, id_ in enumerate(self.ids)}
        corpus = [tokenize(card.card_text()) for card in cards]
        self._bm25 = BM25Okapi(corpus) if corpus else None

    def query(self, text: str, k: int, ids: Collection[str] | None = None) -> list[tuple[str, float]]:
        """Best-first (id, BM25 score), only checkpoints that share at least one word with the query."""
        tokens = tokenize(text)
        if self._bm25 is None or not tokens or k <= 0:
            return []
        scores = self._bm25.get_scores(tokens)
        if ids is None:
            positions = np.arange(len(self.ids))
        else:
            positions = np.array([self._position[i] for i in dict.fromkeys(ids) if i in self._position], dtype=int)
        if positions.size == 0:
            return []
        candidate_scores = scores[positions]
        order = np.argsort(-candidate_scores, kind="stable")[:k]
        return [(self.ids[positions[i]], float(candidate_scores[i])) for i in order if candidate_scores[i] > 0]
