"""The Repo-Prompts oracle: which generated checkpoints satisfy a structured request.

It works on the generator's own structured records (category, sub-type, colour, ...), never on
request text, and shares no code with the check-in pipeline: the benchmark's ground truth must not
depend on the code it grades. Time windows follow docs/repo-prompts.md: Northern seasons, ISO weeks
starting Monday, calendar days/months/years in UTC, a month or season without a year means any year,
and a bound month ("before May", "since March") means its latest start not after `now`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from dateutil.relativedelta import relativedelta

SEASON_MONTHS = {"spring": (3, 4, 5), "summer": (6, 7, 8), "autumn": (9, 10, 11), "winter": (12, 1, 2)}


@dataclass(frozen=True)
class Constraint:
    """One thing a request asks of a checkpoint; `kind` names the attribute, `value` its wanted value."""

    kind: str  # category | synonym | subtype | absent | style | environment | color | version | created | used | order
    value: object


@dataclass(frozen=True)
class TimeSpec:
    """A time phrase before rendering: `unit` and its arguments (see `window`)."""

    unit: str  # day | week | month_rel | month | month_year | season | season_year | year | before | since | date
    args: tuple


def _month_start(dt: datetime) -> datetime:
    return dt.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _latest_month_start(month: int, now: datetime) -> datetime:
    start = datetime(now.year, month, 1, tzinfo=timezone.utc)
    return start if start <= now else start - relativedelta(years=1)


def time_matches(spec: TimeSpec, when: datetime | None, now: datetime) -> bool:
    if when is None:
        return False
    a = spec.args
    if spec.unit == "day":
        day = (now - timedelta(days=a[0])).date()
        return when.date() == day
    if spec.unit == "week":
        ref = (now - timedelta(weeks=a[0])).date()
        monday = ref - timedelta(days=ref.weekday())
        return monday <= when.date() < monday + timedelta(days=7)
    if spec.unit == "month_rel":
        start = _month_start(now) - relativedelta(months=a[0])
        return start <= when < start + relativedelta(months=1)
    if spec.unit == "month":
        return when.month == a[0]
    if spec.unit == "month_year":
        return (when.month, when.year) == (a[0], a[1])
    if spec.unit == "season":
        return when.month in SEASON_MONTHS[a[0]]
    if spec.unit == "season_year":
        return when.month in SEASON_MONTHS[a[0]] and when.year == a[1]
    if spec.unit == "year":
        return when.year == a[0]
    if spec.unit == "before":
        return when < _latest_month_start(a[0], now)
    if spec.unit == "since":
        return when >= _latest_month_start(a[0], now)
    if spec.unit == "date":
        return (when.year, when.month, when.day) == a
    raise ValueError(f"unknown time unit {spec.unit!r}")


def satisfies(record: dict, constraint: Constraint, now: datetime) -> bool:
    kind, value = constraint.kind, constraint.value
    if kind == "absent":  # a subject no checkpoint has
        return False
    if kind == "synonym":  # the category, named by an ordinary synonym
        return record["category"] == value
    if kind in ("category", "subtype", "style", "environment", "color", "version"):
        return record[kind] == value
    if kind == "created":
        return time_matches(value, record["created"], now)
    if kind == "used":
        return time_matches(value, record["used"], now)
    raise ValueError(f"not a filtering constraint: {kind}")


def resolve(records: list[dict], constraints: list[Constraint], now: datetime) -> list[dict]:
    """The checkpoints a request means: all that satisfy every constraint, narrowed by an order word."""
    filters = [c for c in constraints if c.kind != "order"]
    hits = [r for r in records if all(satisfies(r, c, now) for c in filters)]
    for c in constraints:
        if c.kind == "order" and hits:
            field, pick = c.value  # ("created"|"used", "max"|"min")
            dated = [r for r in hits if r[field] is not None]
            if not dated:
                return []
            chosen = (max if pick == "max" else min)(dated, key=lambda r: r[field])
            hits = [chosen]
    return hits
