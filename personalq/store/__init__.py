"""The repository store: the checkpoint catalog (SQLModel), the files, and the dense and sparse indexes.

Everything else in PersonalQ reads checkpoints through `RepoStore`:

    store = RepoStore.open()                      # $PERSONALQ_HOME or repo_store/
    store.load_catalog("catalog.jsonl")
    store.dense_search("plush bear in a forest", k=5)
"""

from personalq.store.card import CheckpointCard, ContextTuple
from personalq.store.errors import ImportReport, StoreError
from personalq.store.repo import DuplicateError, RepoStore

__all__ = ["CheckpointCard", "ContextTuple", "DuplicateError", "ImportReport", "RepoStore", "StoreError"]
