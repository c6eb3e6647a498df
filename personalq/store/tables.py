"""The catalog's SQLModel tables: one row per checkpoint, list fields as queryable rows.

List fields (triggers, subject types, style tags, environment, preview paths) live in
`CheckpointValue` as (checkpoint, field, position, value) so that "every cartoon checkpoint" is an
indexed query rather than a scan of JSON blobs. Datetimes are tz-aware: SQLModel's `UTCDateTime`
stores them as UTC and refuses naive ones.

The schema a catalog has is built by the migrations in `personalq/store/migrations`, not from these
classes: a change here needs a new revision there (a test compares the two).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Column, LargeBinary
from sqlmodel import Field, SQLModel

LIST_VALUE_FIELDS = {
    "triggers": "trigger",
    "subject_types": "subject_type",
    "style_tags": "style_tag",
    "environment": "environment",
    "previews": "preview",
}


class CheckpointRow(SQLModel, table=True):
    __tablename__ = "checkpoint"

    id: str = Field(primary_key=True)
    description: str
    created_at: datetime = Field(index=True)
    version: int | None = None
    last_used_at: datetime | None = Field(default=None, index=True)
    category: str = Field(index=True)
    base_model: str | None = Field(default=None, index=True)
    kind: str | None = Field(default=None, index=True)
    file_path: str | None = None  # relative to the store's home, so a store can be moved
    sha256: str | None = Field(default=None, unique=True, index=True)
    size_bytes: int | None = None
    raw_metadata: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    added_at: datetime
    updated_at: datetime


class CheckpointValue(SQLModel, table=True):
    __tablename__ = "checkpoint_value"

    checkpoint_id: str = Field(foreign_key="checkpoint.id", primary_key=True)
    field: str = Field(primary_key=True, index=True)
    position: int = Field(primary_key=True)
    value: str = Field(index=True)


class BrokenCheckpoint(SQLModel, table=True):
    """A checkpoint that failed while attaching or rendering: not served again until it is fixed.

    Its own table (not a column), so marking or clearing one never rewrites checkpoint rows; removing
    the checkpoint (and so re-adding a fixed file) drops the mark.
    """

    __tablename__ = "broken_checkpoint"

    checkpoint_id: str = Field(foreign_key="checkpoint.id", primary_key=True)
    reason: str
    since: datetime


class StoreRevision(SQLModel, table=True):
    """A counter bumped in the same transaction as every catalog change, so caches can tell."""

    __tablename__ = "store_revision"

    id: int = Field(default=1, primary_key=True)
    revision: int = 0


class DescriptionEmbedding(SQLModel, table=True):
    """Embeddings by (embedder, text hash): rebuilding Chroma must not re-embed 10k descriptions."""

    __tablename__ = "description_embedding"

    embedder: str = Field(primary_key=True)
    text_sha256: str = Field(primary_key=True)
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
