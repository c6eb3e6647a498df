"""The catalog on a loopback PostgreSQL server, as `PERSONALQ_DATABASE_URL` names it for a cluster.

The store already takes any SQLAlchemy URL; this checks that it behaves the same on PostgreSQL as on
SQLite, and what happens when two nodes (two homes, one catalog) add the same checkpoint at once:
one wins, the other is refused in one line and keeps no files for a row it does not have.

The server is started by `loopback.postgresql_server` (initdb + pg_ctl in a temporary folder, loopback
and a private socket folder only) and stopped when the module ends. Skipped where Debian's `postgresql`
or the `psycopg` driver (requirements-cluster.txt) is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from demo_files import copy_demo
from loopback import postgresql_server

pytest.importorskip("psycopg")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def database_url() -> str:
    with postgresql_server() as url:
        yield url


def test_the_store_on_postgresql_imports_lists_marks_and_removes(database_url, tmp_path):
    from personalq.store import RepoStore

    home = tmp_path / "shared-home"
    with RepoStore.open(home, database_url=database_url) as store:
        report = store.import_dir(copy_demo(tmp_path / "source", ["bag-v1", "bear-v1", "bear-v2"]))
        assert sorted(report.added) == ["bag-v1", "bear-v1", "bear-v2"]
        assert [c.id for c in store.list(category="bear")] == ["bear-v1", "bear-v2"]
        store.mark_broken("bear-v1", "failed on node 1")
        store.mark_used("bag-v1")
        revision = store.revision
    with RepoStore.open(home, database_url=database_url) as other:  # a second node sharing the home and the catalog
        assert other.broken() == {"bear-v1": "failed on node 1"}
        assert other.get("bag-v1").last_used_at is not None and other.revision == revision
        assert other.dense_search("a green bag", 1)[0][0] == "bag-v1"
        other.remove("bear-v2")
    with RepoStore.open(home, database_url=database_url) as store:
        assert sorted(c.id for c in store.cards()) == ["bag-v1", "bear-v1"]
        for card in store.cards():
            store.remove(card.id)


def test_a_node_with_its_own_home_keeps_the_shared_catalog(database_url, tmp_path):
    """Files by content hash in a place both nodes share (PERSONALQ_FILES_URL): no row depends on a home."""
    from personalq.store import RepoStore

    shared = str(tmp_path / "shared-files")
    with RepoStore.open(tmp_path / "node1", database_url=database_url, files_url=shared) as store:
        store.import_dir(copy_demo(tmp_path / "source", ["bag-v1"]))
    try:
        with RepoStore.open(tmp_path / "node2", database_url=database_url, files_url=shared) as other:
            assert [c.id for c in other.cards()] == ["bag-v1"]
            card = other.get("bag-v1")
            assert card.file_path.is_file() and card.file_path.is_relative_to((tmp_path / "shared-files").resolve()) and other.check_files().ok
    finally:
        with RepoStore.open(tmp_path / "node1", database_url=database_url, files_url=shared, repair_files=False) as store:
            for card in store.cards():
                store.remove(card.id)
    assert not any(p.is_file() for p in (tmp_path / "shared-files").rglob("*") if p.name != ".write.lock")


ADD = """
import sys
from pathlib import Path
from personalq.store import RepoStore, StoreError
home, url, path = sys.argv[1:4]
store = RepoStore.open(Path(home), database_url=url)
try:
    store.add(Path(path))
    print("added")
except StoreError as error:
    print("refused:", str(error).splitlines()[0])
"""


def test_two_nodes_adding_the_same_checkpoint_one_wins_one_is_refused_without_files(database_url, tmp_path):
    weights = copy_demo(tmp_path / "source", ["bridge-v1"]) / "bridge-v1.safetensors"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1"}
    nodes = [subprocess.Popen([sys.executable, "-c", ADD, str(tmp_path / f"node{i}"), database_url, str(weights)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    outputs = [node.communicate(timeout=300) for node in nodes]
    lines = [out.strip().splitlines()[-1] if out.strip() else f"crashed: {err.strip().splitlines()[-1:]}" for out, err in outputs]
    assert sorted(line.split(":")[0] for line in lines) == ["added", "refused"], lines
    winner = lines.index("added") + 1
    loser = 3 - winner
    assert not list((tmp_path / f"node{loser}" / "checkpoints").glob("*.safetensors"))
    from personalq.store import RepoStore

    with RepoStore.open(tmp_path / f"node{winner}", database_url=database_url) as store:
        card = store.get("bridge-v1")
        assert card.file_path.is_file() and card.file_path.resolve().parent == (tmp_path / f"node{winner}" / "checkpoints").resolve()
        store.remove("bridge-v1")
