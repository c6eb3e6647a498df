"""Check-in over a store holding a catalog written by a test, for the tests of what people type."""

from __future__ import annotations

import json


def checkin_over(entries: list[dict], tmp_path_factory, name: str):
    """A `CheckIn` over a new store under `name`, loaded with `entries` (catalog JSONL lines); none may be refused."""
    from personalq.checkin import CheckIn
    from personalq.store import RepoStore

    store = RepoStore.open(home=tmp_path_factory.mktemp(f"{name}-home"))
    path = tmp_path_factory.mktemp(f"{name}-catalog") / "catalog.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    assert not store.load_catalog(path).refused
    return CheckIn(store)
