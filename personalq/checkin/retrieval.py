"""Hybrid retrieval: the store's dense (Chroma) and BM25 rankings fused by reciprocal rank fusion."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence

RRF_K = 60


def rrf_fuse(rankings: Sequence[Sequence[tuple[str, float]]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Cormack et al. 2009: score(d) = sum over rankings of 1 / (k + rank(d)), rank from 1."""
    scores: dict[str, float] = defaultdict(float)
    for ranking in rankings:
        for rank, (doc_id, _) in enumerate(ranking, start=1):
            scores[doc_id] += 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def hybrid_search(store, query: str, k: int, ids: Collection[str] | None = None, depth: int | None = None) -> list[tuple[str, float]]:
    """Top-`k` by RRF over dense and sparse lists `depth` deep (default 5k: fusion needs overlap)."""
    depth = depth or 5 * k
    ids = sorted(ids) if ids is not None else None  # one order for ties, whatever order a set gives
    dense = store.dense_search(query, depth, ids=ids)
    sparse = store.sparse_search(query, depth, ids=ids)
    return rrf_fuse([dense, sparse])[:k]
