"""The two search indexes over the catalog: Chroma for description embeddings, BM25 for checkpoint cards.

Both are derived data. The catalog stays the source of truth, and `RepoStore` keeps these in step
with it. Chroma is handed our own vectors (its embedding function is disabled, so it never loads
or downloads a model of its own). Each Chroma entry records the embedder and the hash of the text it
embeds, which is how opening a store notices stale entries.

With `PERSONALQ_CHROMA_URL` set, the vectors live on a Chroma server instead (`chromadb.HttpClient`),
so several nodes of a cluster share one dense index; without it, nothing changes (`PersistentClient`
in `home/chroma`). One server may hold several stores, so each store's collection is named by an
identity kept in its home (see `server_collection_name`).

BM25 is not persisted: it is rebuilt in memory from the catalog's cards on the first sparse search
after a change (10k cards take well under a second), so it can never disagree with the catalog on
disk and opening a store stays fast.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from personalq.store.card import CheckpointCard, tokenize
from personalq.store.errors import StoreError, one_line

COLLECTION_NAME = "descriptions"  # the one collection of a store's own PersistentClient folder
SERVER_COLLECTION_FILE = "server-collection"  # in the dense folder: this store's collection on a Chroma server
_SERVER_COLLECTION = re.compile(r"personalq-[0-9a-f]{32}")
_PAGE = 5000  # ids per Chroma call; larger id lists overflow SQLite's variable limit inside chromadb


def server_address(url: str) -> tuple[str, int, bool]:
    """(host, port, ssl) of a Chroma server URL such as http://127.0.0.1:8000; without a port, Chroma's
    8000 for http and 443 for https."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as error:
        raise StoreError(f"PERSONALQ_CHROMA_URL {url!r} is not a URL: {one_line(error)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") or parts.query:
        raise StoreError(f"PERSONALQ_CHROMA_URL {url!r} is not an http(s)://host[:port] address of a Chroma server")
    ssl = parts.scheme == "https"
    return parts.hostname, port if port is not None else (443 if ssl else 8000), ssl


def server_collection_name(directory: Path) -> str:
    """The name of this store's collection on a Chroma server: `personalq-<random uuid>`, kept in its home.

    Why a random identity kept in the home, not a name computed from the home's path or the catalog's
    URL: two machines can have the same home path (/root/.personalq in containers) and nodes of one
    cluster can reach one PostgreSQL catalog by different host names. The home is what nodes of one
    store already share (its checkpoint files live there), so every node of one store finds one name
    and no two stores share one. Created once with a hard link, which fails when another node won the
    race; the loser reads the winner's name.
    """
    path = Path(directory) / SERVER_COLLECTION_FILE
    found = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
    if _SERVER_COLLECTION.fullmatch(found):
        return found
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{SERVER_COLLECTION_FILE}.{uuid.uuid4().hex}")
    draft.write_text(f"personalq-{uuid.uuid4().hex}\n", encoding="utf-8")
    try:
        if found:  # unreadable (hand-edited, truncated): a new collection, refilled from the catalog on open
            os.replace(draft, path)
        else:
            os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        draft.unlink(missing_ok=True)
    return path.read_text(encoding="utf-8").strip()


# What Chroma says when another process holds its database for the moment; retried, never "broken".
BUSY = re.compile(r"pool timed out|database is locked|database table is locked|busy", re.I)
BUSY_RETRY_PAUSES_S = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)
# Chroma writes its HNSW index to disk after this many new vectors (its default: 1000). Until then
# another process with the store open finds the vectors' rows but no index on disk and fails every
# query ("Error creating hnsw segment reader: Nothing found on disk"): the app and a CLI on one store.
SYNC_THRESHOLD = 1


class DenseIndex:
    """A Chroma collection of L2-normalised description vectors, cosine space.

    In this store's own `PersistentClient` folder, or, when `server_url` is given, on that Chroma server.
    """

    def __init__(self, directory: Path, server_url: str | None = None):
        self.directory = Path(directory)
        self.server_url = server_url or None
        self._address = None if self.server_url is None else server_address(self.server_url)  # refused before any write
        self.collection_name = COLLECTION_NAME if self.server_url is None else server_collection_name(self.directory)
        self._client = None
        self._collection = None
        self.recreated = False  # True when the folder was unreadable and had to be started afresh
        self._open()

    def _open(self) -> None:
        if self.server_url is not None:  # a server that does not answer is refused, never "started afresh"
            try:
                return self._connect()
            except Exception as error:
                self.close()
                raise StoreError(f"the Chroma server at {self.server_url} cannot be used: {one_line(error)}") from None
        try:
            self._connect_patiently()
        except Exception:  # a crash can leave Chroma's sqlite/HNSW files unreadable: start afresh
            self.close()
            self._forget_failed_system()
            shutil.rmtree(self.directory, ignore_errors=True)
            self.recreated = True
            self._connect()

    def _connect_patiently(self) -> None:
        """Connect, waiting out another process that holds Chroma's database at this moment ("pool
        timed out while waiting for an open connection", "database is locked"): a busy index is no
        broken one, and starting it afresh would delete the other process's vectors under it."""
        for pause in BUSY_RETRY_PAUSES_S:
            try:
                return self._connect()
            except Exception as error:
                if not BUSY.search(str(error)):
                    raise
                self.close()
                self._forget_failed_system()
                time.sleep(pause)
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

        settings = Settings(anonymized_telemetry=False, allow_reset=False)
        if self._address is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._client = chromadb.PersistentClient(path=str(self.directory), settings=settings)
        else:
            host, port, ssl = self._address
            self._client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
        self._collection = self._create_collection()
        self._collection.count()

    def _create_collection(self):
        local = self.server_url is None  # a server persists its own index
        hnsw = {"space": "cosine", **({"sync_threshold": SYNC_THRESHOLD} if local else {})}
        collection = self._client.get_or_create_collection(self.collection_name, configuration={"hnsw": hnsw}, embedding_function=None)
        if local and (collection.configuration_json.get("hnsw") or {}).get("sync_threshold") != SYNC_THRESHOLD:
            collection.modify(configuration={"hnsw": {"sync_threshold": SYNC_THRESHOLD}})  # a store made before
        return collection

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
        self._client.delete_collection(self.collection_name)
        self._collection = self._create_collection()

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
