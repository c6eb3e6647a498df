"""The catalog as it was when migrations began: five tables, their indexes, the revision counter at 0.

A catalog made before then has some or all of these tables (the old `create_all` on every open made
each one it lacked), and no `alembic_version`: this revision creates only the tables it lacks and
starts the counter only where it is missing, so adopting such a catalog keeps every row.

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

AutoString, UTCDateTime = sqlmodel.sql.sqltypes.AutoString, sqlmodel.sql.sqltypes.UTCDateTime

# Table -> (its columns and constraints, made anew for each use; its indexed columns -> unique).
TABLES = {
    "checkpoint": (lambda: [
        sa.Column("id", AutoString(), nullable=False),
        sa.Column("description", AutoString(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("last_used_at", UTCDateTime(), nullable=True),
        sa.Column("category", AutoString(), nullable=False),
        sa.Column("base_model", AutoString(), nullable=True),
        sa.Column("kind", AutoString(), nullable=True),
        sa.Column("file_path", AutoString(), nullable=True),
        sa.Column("sha256", AutoString(), nullable=True),
        sa.Column("size_bytes", sa.Integer(), nullable=True),
        sa.Column("raw_metadata", sa.JSON(), nullable=False),
        sa.Column("added_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    ], {"base_model": False, "category": False, "created_at": False, "kind": False, "last_used_at": False, "sha256": True}),
    "checkpoint_value": (lambda: [
        sa.Column("checkpoint_id", AutoString(), nullable=False),
        sa.Column("field", AutoString(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("value", AutoString(), nullable=False),
        sa.ForeignKeyConstraint(["checkpoint_id"], ["checkpoint.id"]),
        sa.PrimaryKeyConstraint("checkpoint_id", "field", "position"),
    ], {"field": False, "value": False}),
    "broken_checkpoint": (lambda: [
        sa.Column("checkpoint_id", AutoString(), nullable=False),
        sa.Column("reason", AutoString(), nullable=False),
        sa.Column("since", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["checkpoint_id"], ["checkpoint.id"]),
        sa.PrimaryKeyConstraint("checkpoint_id"),
    ], {}),
    "store_revision": (lambda: [
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    ], {}),
    "description_embedding": (lambda: [
        sa.Column("embedder", AutoString(), nullable=False),
        sa.Column("text_sha256", AutoString(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("embedder", "text_sha256"),
    ], {}),
}


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    for name, (columns, indexed) in TABLES.items():
        if name in existing:
            continue
        op.create_table(name, *columns())
        for column, unique in indexed.items():
            op.create_index(f"ix_{name}_{column}", name, [column], unique=unique)
    if op.get_bind().execute(sa.text("SELECT 1 FROM store_revision WHERE id = 1")).first() is None:
        op.execute("INSERT INTO store_revision (id, revision) VALUES (1, 0)")


def downgrade() -> None:
    for name in reversed(TABLES):
        op.drop_table(name)
