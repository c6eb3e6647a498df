"""The catalog's schema migrations (Alembic), shipped inside the package so that `catalog.connect`
brings every catalog, SQLite or PostgreSQL, to the newest schema before anything reads it.

There is no alembic.ini: `config` builds the configuration here and hands env.py the caller's
connection, so an installed wheel migrates with nothing beside it. Opening a catalog already at the
head costs one read of `alembic_version`; only a catalog behind it takes the lock and migrates.

A new revision, after changing `tables.py` (autogenerate compares the tables with the head schema):

    from alembic import command
    from sqlmodel import create_engine
    from personalq.store import migrations
    with create_engine("sqlite://").begin() as connection:
        command.upgrade(migrations.config(connection), "head")
        command.revision(migrations.config(connection), "what changed and why", autogenerate=True)
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.engine import Engine

from personalq.store.errors import StoreError

__all__ = ["config", "current_revision", "head_revision", "upgrade"]

# Any fixed 64-bit number: PostgreSQL's advisory lock that one node holds while it migrates.
_POSTGRES_LOCK_KEY = 0x5051_0027


def config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for these migrations, env.py running on `connection`."""
    alembic_config = Config()
    alembic_config.set_main_option("script_location", str(Path(__file__).parent))
    alembic_config.attributes["connection"] = connection
    return alembic_config


@cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(config())


def head_revision() -> str:
    return _scripts().get_current_head()


@cache
def _known_revisions() -> frozenset[str]:
    return frozenset(script.revision for script in _scripts().walk_revisions())


def current_revision(connection: Connection) -> str | None:
    """The revision the catalog is at; None for a new catalog or one made before migrations existed."""
    return MigrationContext.configure(connection).get_current_revision()


def _refuse_unknown(current: str | None, url: str) -> None:
    if current is not None and current not in _known_revisions():
        raise StoreError(
            f"the catalog {url} is at schema revision {current!r}, which this PersonalQ does not know (its newest is "
            f"{head_revision()!r}): a newer PersonalQ wrote it; upgrade PersonalQ to open it"
        )


def _lock(connection: Connection) -> None:
    """Hold the catalog's write lock until `connection` commits, so that one process migrates at a time.

    SQLite: BEGIN IMMEDIATE takes the database's write lock now (a second opener waits on the busy
    timeout), and the DDL runs inside that transaction. PostgreSQL: a transaction-scoped advisory lock.
    """
    dialect = connection.dialect.name
    if dialect == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif dialect == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _POSTGRES_LOCK_KEY})


def upgrade(engine: Engine) -> None:
    """Bring the catalog to the head revision, or refuse (writing nothing) one that a newer PersonalQ wrote.

    A catalog made before migrations existed (tables, no `alembic_version`) is adopted by the initial
    revision, which creates only the tables it lacks, keeping every row.
    """
    url = engine.url.render_as_string(hide_password=True)
    with engine.connect() as connection:
        current = current_revision(connection)
    if current == head_revision():
        return
    _refuse_unknown(current, url)
    with engine.connect() as connection:
        _lock(connection)
        current = current_revision(connection)  # another process may have migrated while this one waited
        _refuse_unknown(current, url)
        if current != head_revision():
            command.upgrade(config(connection), "head")
        connection.commit()
