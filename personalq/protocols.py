"""The extension points of PersonalQ, named: what each part needs from the others.

Each is a `typing.Protocol`: any class with these members fits, no base class or registration needed
(except a base-model loader, which serving must be told about, see `personalq.serving.base`).

- `CheckpointStore`: what Check-in and serving read from a repository (`RepoStore` is the one shipped).
- `Embedder`: the sentence embedder of the dense index (`SentenceTransformerEmbedder`).
- `RerankerBackend`: Check-in's optional final chooser among checkpoints that all fit (`LiteLLMReranker`).
- `BaseModelLoader`: loads a base model serving cannot load itself, and names its family.
- `BaseShapes`: what upload validation knows about a base model without loading it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # annotations only: importing the store's tables here would cost every importer SQLModel
    from personalq.checkin.rerank import RerankOutcome
    from personalq.store.card import CheckpointCard

__all__ = ["BaseModelLoader", "BaseShapes", "CheckpointStore", "Embedder", "RerankerBackend"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into float32, L2-normalised rows (cosine similarity is then a dot product)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class CheckpointStore(Protocol):
    """The checkpoints Check-in chooses among and serving loads.

    Check-in reads `cards`, `dense_search` and `sparse_search` (and, when present, `revision`, to
    rebuild its snapshot only after a change); serving reads `get` (and, when present, `mark_used`,
    `broken` and `mark_broken`).
    """

    def cards(self) -> list[CheckpointCard]: ...

    def get(self, checkpoint_id: str) -> CheckpointCard: ...

    def dense_search(self, query: str, k: int, ids: Collection[str] | None = None) -> list[tuple[str, float]]: ...

    def sparse_search(self, query: str, k: int, ids: Collection[str] | None = None) -> list[tuple[str, float]]: ...


class RerankerBackend(Protocol):
    """Chooses one of `cards` (all of which already satisfy the request's constraints), or abstains.

    Return `RerankOutcome(checkpoint_id, "chosen")` to pick one, or `RerankOutcome(None, status, detail)`
    with status "abstained", "refused", "error" or "timeout": Check-in then keeps its own answer
    (a selection or a clarifying question). `name` appears in the reason Check-in gives.
    """

    name: str

    def choose(self, request: str, cards: Sequence[CheckpointCard]) -> RerankOutcome: ...


class BaseShapes(Protocol):
    """What validation needs to know about a base model, without loading its weights."""

    name: str

    def unet_shapes(self) -> Mapping[str, tuple[int, ...]]:
        """The UNet's state-dict names (diffusers layout) and shapes."""
        ...

    def unet_config(self) -> dict[str, Any]:
        """The UNet's diffusers config (to convert original-layout checkpoints)."""
        ...

    def text_widths(self) -> Mapping[str, int]:
        """Token-embedding width per text encoder: {"text_encoder": 768, "text_encoder_2": 1280}."""
        ...


class BaseModelLoader(Protocol):
    """Loads the resident base model for specs that `handles` accepts.

    `load` returns a diffusers text-to-image pipeline (UNet, text encoder(s), tokenizer(s), VAE) in
    `dtype`, and `family` is the name catalogs give checkpoints made for it ("sd15", "sdxl", ...):
    serving refuses a checkpoint of another family by name before it could fail by shape.
    """

    family: str

    def handles(self, spec: str) -> bool: ...

    def load(self, spec: str, dtype: Any) -> Any: ...
