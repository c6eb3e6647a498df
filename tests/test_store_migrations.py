"""The catalog's schema comes from Alembic migrations on every engine: the head revision builds exactly
the tables `tables.py` declares, a catalog made before migrations is adopted with its rows, one written
by a newer PersonalQ is refused untouched, and processes that open a new catalog at once all succeed.

PostgreSQL cases run on a loopback server started here (initdb + pg_ctl in a temporary folder) and
are skipped where Debian's `postgresql` or the `psycopg` driver is missing.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import insert, select, text
from sqlmodel import SQLModel, create_engine

from loopback import postgresql_server
from personalq.store import StoreError, catalog, migrations
from personalq.store.tables import BrokenCheckpoint, CheckpointRow, CheckpointValue, DescriptionEmbedding, StoreRevision

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def postgres_server() -> str:
    """The URL of a loopback PostgreSQL server's database, for the module's tests (each makes its own database there)."""
    pytest.importorskip("psycopg")
    with postgresql_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> str:
    """A new, empty catalog database on each engine."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    server = request.getfixturevalue("postgres_server")
    name = f"catalog_{uuid.uuid4().hex}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


def _differences(engine) -> list:
    with engine.connect() as connection:
        return compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)


def _version(engine) -> str | None:
    with engine.connect() as connection:
        return migrations.current_revision(connection)


def _old_store(url: str, tables: list) -> None:
    """A catalog as PersonalQ made it before migrations: `create_all` on the tables that existed, counter at 7, a row each."""
    engine = create_engine(url)
    SQLModel.metadata.create_all(engine, tables=[t.__table__ for t in tables])
    with engine.begin() as connection:
        connection.execute(insert(StoreRevision), [{"id": 1, "revision": 7}])
        connection.execute(insert(CheckpointRow), [{
            "id": "bear-v1", "description": "a brown bear", "created_at": NOW, "category": "bear", "raw_metadata": {"k": 1},
            "sha256": "ab" * 32, "added_at": NOW, "updated_at": NOW,
        }])
        connection.execute(insert(CheckpointValue), [{"checkpoint_id": "bear-v1", "field": "trigger", "position": 0, "value": "<bear-v1>"}])
        if BrokenCheckpoint in tables:
            connection.execute(insert(BrokenCheckpoint), [{"checkpoint_id": "bear-v1", "reason": "NaN in UNet", "since": NOW}])
    engine.dispose()


def test_the_head_schema_is_the_one_tables_py_declares(database_url):
    engine = catalog.connect(database_url)
    try:
        assert _version(engine) == migrations.head_revision()
        assert _differences(engine) == []
        assert catalog.revision(engine) == 0
        catalog.connect(database_url).dispose()  # opening again at the head changes nothing
        assert catalog.revision(engine) == 0 and _differences(engine) == []
    finally:
        engine.dispose()


def test_an_index_tables_py_declares_and_the_catalog_lacks_is_a_difference(tmp_path):
    """The comparison above can fail: a catalog short of one index is told apart from the declared schema."""
    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.db'}")
    with engine.begin() as connection:
        connection.execute(text("DROP INDEX ix_checkpoint_sha256"))
    assert [d[0] for d in _differences(engine)] == ["add_index"]
    engine.dispose()


def test_downgrading_to_base_and_upgrading_again_rebuilds_the_same_schema(tmp_path):
    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.db'}")
    with engine.begin() as connection:
        command.downgrade(migrations.config(connection), "base")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'")).scalars().all() == ["alembic_version"]
    engine.dispose()
    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.db'}")
    assert _differences(engine) == [] and catalog.revision(engine) == 0
    engine.dispose()


@pytest.mark.parametrize("tables", [
    [CheckpointRow, CheckpointValue, BrokenCheckpoint, StoreRevision, DescriptionEmbedding],
    [CheckpointRow, CheckpointValue, StoreRevision],  # made before broken marks and the embedding cache existed
], ids=["all-tables", "older-without-two-tables"])
def test_a_store_made_before_migrations_is_adopted_with_its_rows(database_url, tables):
    _old_store(database_url, tables)
    engine = catalog.connect(database_url)
    try:
        assert _version(engine) == migrations.head_revision()
        assert _differences(engine) == []
        assert catalog.revision(engine) == 7
        card = catalog.read_cards(engine, Path("/home"))["bear-v1"]
        assert (card.description, card.triggers, card.raw_metadata, card.created_at) == ("a brown bear", ["<bear-v1>"], {"k": 1}, NOW)
        with engine.connect() as connection:
            broken = connection.execute(select(BrokenCheckpoint.checkpoint_id, BrokenCheckpoint.reason)).all()
            assert broken == ([("bear-v1", "NaN in UNet")] if BrokenCheckpoint in tables else [])
    finally:
        engine.dispose()


def test_a_catalog_from_a_newer_personalq_is_refused_in_one_line_and_left_as_it_was(tmp_path):
    path = tmp_path / "catalog.db"
    catalog.connect(f"sqlite:///{path}").dispose()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE alembic_version SET version_num = '0042_from_the_future'")
        db.execute("DROP TABLE description_embedding")  # what the newer revision might have done: nothing may recreate it
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreError) as refused:
        catalog.connect(f"sqlite:///{path}")
    message = str(refused.value)
    assert "\n" not in message and "'0042_from_the_future'" in message and repr(migrations.head_revision()) in message
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.db"]  # no journal left behind either


OPEN = """
import sys, time
from pathlib import Path
from personalq.store import catalog, migrations
url, ready, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
migrations.head_revision()  # read the revision files now, not in the race
ready.touch()
while not go.exists():
    time.sleep(0.001)
catalog.connect(url).dispose()
"""


@pytest.mark.slow
def test_processes_opening_a_new_catalog_at_once_all_succeed_and_migrate_it_once(database_url, tmp_path):
    """Each process imports the store first; then all open the new catalog at once: one migrates, the others wait and find it done."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    ready, go = [tmp_path / f"ready-{i}" for i in range(3)], tmp_path / "go"
    opens = [subprocess.Popen([sys.executable, "-c", OPEN, database_url, str(r), str(go)], env=env, stderr=subprocess.PIPE, text=True)
             for r in ready]
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready) and time.monotonic() < deadline and all(p.poll() is None for p in opens):
        time.sleep(0.01)
    go.touch()
    errors = [p.communicate(timeout=120)[1] for p in opens]
    assert [p.returncode for p in opens] == [0, 0, 0], errors
    engine = create_engine(database_url)
    try:
        assert _version(engine) == migrations.head_revision() and _differences(engine) == []
        with engine.connect() as connection:
            assert connection.execute(select(StoreRevision.id, StoreRevision.revision)).all() == [(1, 0)]
    finally:
        engine.dispose()
