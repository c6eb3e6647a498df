"""The checkpoint context tuple: validated input (`ContextTuple`) and the immutable view (`CheckpointCard`).

Input from catalogs, sidecars and file headers goes through `ContextTuple` so that every source is
held to the contract of `shared/docs/repo-prompts.md` and a wrong type becomes a one-line refusal.
`CheckpointCard` is what the rest of PersonalQ reads: a plain frozen dataclass, because Check-in
snapshots the whole catalog and 100k pydantic validations would cost seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from personalq.store.errors import StoreError
from personalq.store.metadata import check_structure
from personalq.store.paths import check_id

Kind = Literal["lora", "dreambooth", "textual_inversion"]
KINDS: tuple[str, ...] = ("lora", "dreambooth", "textual_inversion")
LIST_FIELDS = ("triggers", "subject_types", "style_tags", "environment")
CONTEXT_FIELDS = (
    "id", "triggers", "subject_types", "style_tags", "description", "created_at", "version",
    "environment", "last_used_at", "category", "base_model", "kind",
)
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
_SEASONS = ("winter", "winter", "spring", "spring", "spring", "summer", "summer", "summer",
            "autumn fall", "autumn fall", "autumn fall", "winter")


EARLIEST_YEAR, LATEST_YEAR = 1970, 2200
MAX_DESCRIPTION_CHARS = 8000
MAX_ITEM_CHARS = 200
MAX_ITEMS = 64


def plausible_date(moment: datetime) -> bool:
    """Checkpoint dates lie between 1970 and 2200; `inf`, year 9999 or year 1 are mistakes or attacks."""
    return EARLIEST_YEAR <= moment.year <= LATEST_YEAR


def to_utc(value: datetime | date | str) -> datetime:
    """ISO-8601 date or date-time (or a YAML-parsed date) as a tz-aware UTC datetime; naive means UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip())
    elif not isinstance(value, datetime) and isinstance(value, date):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        raise TypeError(f"expected an ISO-8601 date, got {type(value).__name__}")
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def iso_z(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


class ContextTuple(BaseModel):
    """One checkpoint's context tuple as the catalog contract defines it; extra keys are kept aside."""

    model_config = ConfigDict(extra="allow", str_strip_whitespace=True)

    id: str
    triggers: list[str]
    subject_types: list[str]
    style_tags: list[str] = []
    description: str
    created_at: datetime
    version: int | None = None
    environment: list[str] = []
    last_used_at: datetime | None = None
    category: str | None = None
    base_model: str | None = None
    kind: Kind | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_id(value)

    @field_validator(*LIST_FIELDS, mode="before")
    @classmethod
    def _one_string_is_a_list(cls, value: Any) -> Any:
        # YAML sidecars often write `triggers: <bear>`; ModelSpec writes comma-separated strings.
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator(*LIST_FIELDS)
    @classmethod
    def _no_blank_items(cls, value: list[str]) -> list[str]:
        items = [item.strip() for item in value]
        if any(not item for item in items):
            raise ValueError("items may not be blank")
        if len(items) > MAX_ITEMS or any(len(item) > MAX_ITEM_CHARS for item in items):
            raise ValueError(f"at most {MAX_ITEMS} items of at most {MAX_ITEM_CHARS} characters each")
        return list(dict.fromkeys(items))

    @field_validator("description")
    @classmethod
    def _description_size(cls, value: str) -> str:
        if len(value) > MAX_DESCRIPTION_CHARS:
            raise ValueError(f"{len(value):,} characters is over the {MAX_DESCRIPTION_CHARS:,}-character limit")
        return value

    @field_validator("triggers", "subject_types")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("needs at least one value")
        return value

    @field_validator("created_at", "last_used_at", mode="before")
    @classmethod
    def _dates(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, (str, date)):
            try:
                moment = to_utc(value)
            except (ValueError, OverflowError):
                raise ValueError(f"{str(value)[:40]!r} is not an ISO-8601 date or date-time") from None
            if not plausible_date(moment):
                raise ValueError(f"{str(value)[:40]!r} is outside the years {EARLIEST_YEAR}-{LATEST_YEAR}")
            return moment
        raise ValueError(f"expected an ISO-8601 date or date-time, got {type(value).__name__}")

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        if isinstance(value, bool) or isinstance(value, float):
            raise ValueError("version must be an integer")
        if isinstance(value, int) and not 0 <= value < 2**31:
            raise ValueError(f"version must be between 0 and {2**31 - 1}")
        return value

    @field_validator("category", "base_model", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def extras(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @classmethod
    def parse(cls, data: dict[str, Any]) -> ContextTuple:
        """Validate, turning pydantic's multi-line report into the first problem on one line."""
        if not isinstance(data, dict):
            raise StoreError(f"a context tuple must be a mapping, got {type(data).__name__}")
        check_structure(data, "entry")
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "entry"
            message = first["msg"].removeprefix("Value error, ")
            more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
            raise StoreError(f"{where}: {message}{more}") from None


def season_words(moment: datetime) -> str:
    return _SEASONS[moment.month - 1]


@dataclass(frozen=True, slots=True)
class CheckpointCard:
    """One checkpoint as stored: the context tuple plus where its files are and when it changed."""

    id: str
    triggers: list[str]
    subject_types: list[str]
    style_tags: list[str]
    description: str
    created_at: datetime
    version: int | None
    environment: list[str]
    last_used_at: datetime | None
    category: str
    base_model: str | None
    kind: str | None
    file_path: Path | None
    sha256: str | None
    size_bytes: int | None
    previews: list[Path]
    raw_metadata: dict = field(repr=False)
    added_at: datetime
    updated_at: datetime

    @property
    def trigger(self) -> str:
        return self.triggers[0]

    def card_text(self) -> str:
        """The sparse "checkpoint card": what BM25 matches a request's words against."""
        created = self.created_at
        parts = [
            *self.triggers,
            *self.subject_types,
            *self.style_tags,
            *self.environment,
            self.description,
            f"created {_MONTHS[created.month - 1]} {season_words(created)} {created.year}",
        ]
        if self.version is not None:
            parts.append(f"version {self.version} v{self.version}")
        return " ".join(parts)

    def to_catalog_entry(self, home: Path | None = None) -> dict[str, Any]:
        """The catalog JSONL dict; file paths are written relative to `home` when given."""

        def rel(path: Path) -> str:
            return path.relative_to(home).as_posix() if home is not None else str(path)

        entry: dict[str, Any] = {
            "id": self.id,
            "triggers": list(self.triggers),
            "subject_types": list(self.subject_types),
            "style_tags": list(self.style_tags),
            "description": self.description,
            "created_at": iso_z(self.created_at),
            "version": self.version,
            "environment": list(self.environment),
            "last_used_at": iso_z(self.last_used_at),
            "category": self.category,
            "base_model": self.base_model,
            "kind": self.kind,
        }
        if self.file_path is not None:
            entry["file"] = rel(self.file_path)
            entry["sha256"] = self.sha256
            entry["size_bytes"] = self.size_bytes
        if self.previews:
            entry["previews"] = [rel(p) for p in self.previews]
        return entry


_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-case word pieces: `<bear-v4>` gives `bear`, `v4`, so triggers match their parts."""
    return _TOKEN.findall(text.lower())
