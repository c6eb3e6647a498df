"""Alembic's entry point, run by `personalq.store.migrations` on the connection it hands over in
`config.attributes["connection"]`, inside the transaction (and lock) that caller holds: online only,
as the store never writes SQL scripts for someone else to run.
"""

from alembic import context
from sqlmodel import SQLModel

import personalq.store.tables  # noqa: F401  (registers the tables autogenerate compares with)

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=SQLModel.metadata,
    render_as_batch=True,  # SQLite alters a table by copying it: autogenerate writes the batch form that works on both
)
with context.begin_transaction():
    context.run_migrations()
