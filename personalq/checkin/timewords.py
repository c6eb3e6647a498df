"""Time phrases in a request, turned into half-open UTC windows against `now`.

dateparser turns the phrase into a moment ("three days ago", "last week", "March 3, 2025"); this
module only decides how wide the window around that moment is (the phrase's unit: a calendar day,
an ISO week, a month, a year) and handles what a point parser cannot: a month or season without a
year (any year, per docs/repo-prompts.md) and bounds ("before May", "since March").
"""

from __future__ import annotations

import calendar
import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import dateparser
from dateutil.relativedelta import relativedelta

SEASONS = {"spring": (3, 4, 5), "summer": (6, 7, 8), "autumn": (9, 10, 11), "fall": (9, 10, 11), "winter": (12, 1, 2)}
# "early 2025", "the end of 2024": a year in thirds.
YEAR_PARTS = {"early": 1, "beginning": 1, "start": 1, "mid": 5, "middle": 5, "late": 9, "end": 9}
MONTH_PARTS = {"early": 1, "beginning": 1, "start": 1, "mid": 11, "middle": 11, "late": 21, "end": 21}  # the day each third starts
# Fixed-date holidays dateparser does not read: (month, day).
HOLIDAYS = {"christmas eve": (12, 24), "christmas day": (12, 25), "christmas": (12, 25), "new year's eve": (12, 31), "new years eve": (12, 31),
            "new year's day": (1, 1), "new years day": (1, 1), "halloween": (10, 31), "valentine's day": (2, 14),
            "valentines day": (2, 14), "xmas eve": (12, 24), "xmas": (12, 25),
            "new year's": (1, 1), "new years": (1, 1), "new year": (1, 1)}  # "around new year's", "since new year": its first day
_BOUND_ONLY = "new year"  # a bare "new year" is a day only after "since", "before"...: not "a new year card"
_WEEKDAY = "|".join(calendar.day_name)
_SEASON = "(?:" + "|".join(SEASONS) + ")"  # "since the summer": the latest begun
_SEASON_YEAR = rf"{_SEASON}\s+(?:of\s+)?(?:\d{{4}}|(?:last|this)\s+(?:year|yr))"  # "since spring last year"
_MONTHS = "|".join(calendar.month_name[1:])
_MONTH_ABBR = "|".join([*calendar.month_abbr[1:], "Sept"])
_MONTH = rf"(?:{_MONTHS}|(?:{_MONTH_ABBR})\.?)"
# "may" and "march" are also verbs: lower-case, they name a month only after a word that introduces one.
_VERB_MONTH = re.compile(r"^(?:may|march)$")
_MONTH_CUE = re.compile(r"\b(?:in|from|during|on|of|since|before|after|until|the|this|past|last|and|between)\s+$", re.I)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_NUMERIC_DATE = r"\d{1,2}/\d{1,2}/\d{4}"
_HOLIDAY = "|".join(sorted(set(HOLIDAYS) - {_BOUND_ONLY}, key=len, reverse=True))
_REL_YEAR = r"(?:of\s+)?(?:last|this)\s+(?:year|yr)"
_YEAR_NAMED = r"(?:of\s+)?(?:(?:last|this)\s+(?:year|yr)|(?:19|20)\d\d)"  # "of last year", "2025"
_DAY_OF_MONTH = r"\d{1,2}(?:st|nd|rd|th)"  # "since the 17th": a day of the latest month that has had it
_POINT = (rf"(?:{_HOLIDAY}|{_MONTH}\s+{_DAY},?\s+\d{{4}}|{_MONTH}\s+{_DAY}|{_MONTH}\s+\d{{4}}|{_MONTH}\s+{_REL_YEAR}|{_MONTH}|"
          rf"\d{{4}}-\d{{2}}-\d{{2}}|{_NUMERIC_DATE}|{_SEASON_YEAR}|{_SEASON}|\d{{4}}|{_DAY_OF_MONTH}|(?:last|this)\s+(?:week|month|year)|{_WEEKDAY})")
_NUM = r"(?:\d+|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(day|week|wk|month|year|yr)"  # "this yr", "past 2 wks": the chat abbreviations of a unit
_UNIT_NAMES = {"wk": "week", "yr": "year"}
_COUNT_WORDS = {w: i for i, w in enumerate("a one two three four five six seven eight nine ten eleven twelve".split())} | {
    "a": 1, "an": 1, "couple": 2, "few": 3}  # "the past couple of weeks", "the past few days"
# "older than" / "no older than" / "newer than" / "no newer than" a point: the bound each sets
_THAN_BOUNDS = {(True, False): "before", (True, True): "since", (False, False): "after", (False, True): "until"}
_PREP = r"(?:(?:in|from|during|on|of|created|made|trained|used)\s+)?"

_MADE_OR_USED = r"(?:(?:created|made|trained|used)\s+)?"  # "made between may and june"
# "haven't touched it since": a negated use, whose window of last use follows
_NOT_USED = r"\b(?:haven'?t|havent|have\s+not|hasn'?t|has\s+not|not|never)\s+(?:\w+\s+)?"
_USE_VERB = r"(?:used|touched|opened|run)\s+(?:it\s+|them\s+)?"
# Order matters: longer, more specific phrases first; each match consumes its characters.
PATTERNS = [
    ("between", re.compile(rf"\b{_MADE_OR_USED}between\s+(?:the\s+)?({_POINT})\s+(?:and|-|to)\s+(?:the\s+)?({_POINT})"
                           rf"(?:\s+({_REL_YEAR}))?\b", re.I)),
    # "jul-aug last year", "from july to september 2025": two months and all between, as "between"
    ("between", re.compile(rf"\b{_MADE_OR_USED}(?:from\s+)?(?:the\s+)?({_MONTH})\s*(?:-|–|to|through|thru|till|until)\s*"
                           rf"(?:the\s+)?({_MONTH}(?:\s+\d{{4}})?)(?:\s+({_REL_YEAR}))?\b", re.I)),
    # "haven't used since march 2025": last used then (the window's words start at "used")
    ("not_since", re.compile(rf"{_NOT_USED}({_USE_VERB}since\s+(?:the\s+)?({_POINT}))\b", re.I)),
    # "haven't used at all this year", "not used in 2026": last used before it began
    ("not_in", re.compile(rf"{_NOT_USED}({_USE_VERB}(?:at\s+all\s+)?(?:in\s+|during\s+)?(this\s+(?:week|month|year)|(?:19|20)\d\d))\b", re.I)),
    # "haven't used in over a year", "not used in 3 months": last used before that long ago
    ("not_within", re.compile(rf"\b(?:haven'?t|havent|have\s+not|hasn'?t|has\s+not|not)\s+(?:\w+\s+)?((?:used|touched|opened|run)\s+(?:it\s+|them\s+)?(?:in|for)\s+"
                              rf"(?:over\s+|more\s+than\s+|the\s+(?:past|last)\s+)?({_NUM})\s+{_UNIT}s?)\b", re.I)),
    # "from 2025 or later", "march onwards", "from 2025 on", "2024 or earlier": the point and all after (or before) it
    ("open_bound", re.compile(rf"\b(?:from\s+|in\s+|since\s+)?(?:the\s+)?({_POINT}),?\s+(?:(?:or|and)\s+(later|after|newer|since|up|"
                              rf"earlier|before|older|prior)|(onwards?|forwards?|on(?!\s+\w)))\b", re.I)),
    # "older than 2025" is before it; "no older than 2025" is from its start on
    ("than", re.compile(rf"\b(no\s+|not\s+)?(older|earlier|newer|later|younger)\s+than\s+(?:the\s+)?({_POINT})\b", re.I)),
    # "after 2025 started": from the point's start on, as "since 2025"
    ("bound", re.compile(rf"(?<!right\s)(?<!just\s)\b(before|since|after|until)\s+(?:the\s+)?({_POINT}|{_BOUND_ONLY})(\s+(?:started|began|begun|kicked\s+off))?\b", re.I)),
    # "less than a year old", "under 6 months old", "over a year old": made since (or before) that long ago
    ("age", re.compile(rf"\b(less|under|younger|more|over|older)\s+(?:than\s+)?({_NUM})\s+{_UNIT}s?\s+old\b", re.I)),
    ("rolling", re.compile(rf"\b(?:in\s+|within\s+|over\s+)?(?:the\s+)?(?:past|last|previous)\s+({_NUM})\s+{_UNIT}s?\b", re.I)),
    # "in the last week", "over the past month", "this past week": the week up to now, where "last week" is the calendar one
    ("rolling", re.compile(rf"\b(?:in\s+|within\s+|over\s+|during\s+)?(?:the|this)\s+(?:past|last|previous)\s+(){_UNIT}\b(?!\s+(?:of|before)\b)", re.I)),
    # "used on the 5th", "the 5th of this month", "on the 3rd of march": a day of a month, no version
    # "the 4th of july last year", "on the 3rd of march 2025": that year's
    ("day_of_month", re.compile(rf"\bon\s+the\s+({_DAY_OF_MONTH})(?:\s+of\s+(?:(this|last)\s+month|({_MONTH})(?:,?\s+({_YEAR_NAMED}))?))?\b", re.I)),
    ("day_of_month", re.compile(rf"\bthe\s+({_DAY_OF_MONTH})\s+of\s+(?:(this|last)\s+month|({_MONTH})(?:,?\s+({_YEAR_NAMED}))?)\b", re.I)),
    # "the second half of 2024", "the first half of last year": six months, no second version
    ("year_half", re.compile(r"\b" + _PREP + r"(?:the\s+)?(first|second|1st|2nd)\s+half\s+of\s+((?:19|20)\d\d|last\s+year|this\s+year)\b", re.I)),
    ("month_rel_year", re.compile(rf"\b{_PREP}({_MONTH})\s+(?:of\s+)?(last|this)\s+(?:year|yr)\b", re.I)),
    # "around christmas", "right before xmas last year": near the holiday is its month
    ("holiday", re.compile(r"\b" + _PREP + r"(?:on\s+)?(around\s+|near\s+|about\s+|(?:right|just)\s+(?:before|after)\s+)?(" + _HOLIDAY
                           + r")(?:\s+(?:of\s+)?(last\s+year|(?:19|20)\d\d))?\b", re.I)),
    ("date", re.compile(rf"\b{_PREP}({_MONTH}\s+{_DAY},?\s+\d{{4}}|\d{{4}}-\d{{2}}-\d{{2}}|{_NUMERIC_DATE}|{_MONTH}\s+{_DAY}(?!\d))\b", re.I)),
    ("ago", re.compile(rf"\b({_NUM}\s+(day|week|month|year)s?\s+ago)\b", re.I)),
    # "the year before last": the calendar unit two back
    ("before_last", re.compile(rf"\b(?:from\s+|in\s+)?(?:the\s+)?{_UNIT}\s+before\s+last\b", re.I)),
    ("relative", re.compile(rf"\b(?:from\s+|in\s+)?((this|last|past|previous)\s+{_UNIT})\b", re.I)),
    # not after "for": "a bear for tonight" is when the picture is wanted
    ("day", re.compile(r"\b(?<!for\s)(?:from\s+)?(today|tonight|this\s+(?:morning|afternoon|evening)|last\s+night|"
                       r"(?:the\s+)?day\s+before\s+yesterday|yesterday)(?:'s)?\b", re.I)),
    ("weekday", re.compile(rf"\b(?:on\s+|last\s+)?({_WEEKDAY})\b", re.I)),
    # not after a possessive: "in its winter coat" is how the subject looks
    ("season", re.compile(r"\b(?<!its\s)(?<!his\s)(?<!her\s)(?<!their\s)" + _PREP
                          + rf"(?:the\s+)?(this\s+past\s+|last\s+|past\s+|this\s+)?({_SEASON})(?:\s+(?:of\s+)?(\d{{4}}))?\b", re.I)),
    # "at the end of october", "late march 2025": that third of the month (the latest begun, without a year)
    ("month_part", re.compile(rf"\b{_PREP}(?:at\s+)?(?:the\s+)?(?:very\s+)?(early|mid|late|beginning|start|middle|end)(?:[\s-]+of)?[\s-]+({_MONTH})"
                              rf"(?:,?\s+(\d{{4}}))?\b", re.I)),
    ("month_year", re.compile(rf"\b{_PREP}({_MONTH})\s+(\d{{4}})\b", re.I)),
    # "this june", "this past june", "last december" before this year's has begun; not "last june" in
    # november, which some say of last year's and some of the latest
    ("named_month", re.compile(rf"\b{_PREP}(this\s+past\s+|this\s+|last\s+)({_MONTH})\b", re.I)),
    ("month", re.compile(rf"\b{_PREP}({_MONTH})\b", re.I)),
    ("year_part", re.compile(r"\b" + _PREP + r"(?:the\s+)?(early|mid|late|beginning|start|middle|end)(?:[\s-]+of)?[\s-]+((?:19|20)\d\d)\b", re.I)),
    # "in 2025", "the 2025 one", "my 2024 dog": a year alone is when it was made; not a count ("2000 images")
    ("year", re.compile(r"\b(?:(?:in|from|during|of|since|or|and|nor)\s+)?((?:19|20)\d\d)\b(?!\s*(?:images|pictures|pics|photos|samples|steps))", re.I)),
]


@dataclass(frozen=True)
class TimeWindow:
    """Moments in [start, end), or in any year's `months` when the request named no year."""

    words: str
    start: datetime | None = None
    end: datetime | None = None
    months: tuple[int, ...] = ()

    def contains(self, when: datetime | None) -> bool:
        if when is None:
            return False
        if self.months and when.month not in self.months:
            return False
        if self.start is not None and when < self.start:
            return False
        if self.end is not None and when >= self.end:
            return False
        return True


@functools.lru_cache(maxsize=4096)
def _moment(phrase: str, now: datetime) -> datetime | None:
    settings = {"RELATIVE_BASE": now.replace(tzinfo=None), "PREFER_DATES_FROM": "past", "PREFER_DAY_OF_MONTH": "first"}
    found = dateparser.parse(phrase, languages=["en"], settings=settings)
    return None if found is None else found.replace(tzinfo=timezone.utc)


def _day(moment: datetime) -> tuple[datetime, datetime]:
    start = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1)


def _span(moment: datetime, unit: str) -> tuple[datetime, datetime]:
    start, _ = _day(moment)
    if unit == "day":
        return start, start + timedelta(days=1)
    if unit == "week":
        start -= timedelta(days=start.weekday())
        return start, start + timedelta(days=7)
    if unit == "month":
        start = start.replace(day=1)
        return start, start + relativedelta(months=1)
    start = start.replace(month=1, day=1)
    return start, start + relativedelta(years=1)


def _month_number(name: str) -> int:
    key = name.rstrip(".")[:3].title()
    return list(calendar.month_abbr).index(key)


def _latest_start(month: int, now: datetime, day: int = 1) -> datetime:
    start = datetime(now.year, month, day, tzinfo=timezone.utc)
    return start if start <= now else start - relativedelta(years=1)


def _named_year(words: str, now: datetime) -> int:
    """"2025", "of last year", "this yr", "march last year": the year they name."""
    digits = re.search(r"\d{4}", words)
    return int(digits.group()) if digits else now.year - int(re.search(r"\blast\b", words, re.I) is not None)


def _day_of_month(day: int, which: str | None, month: str | None, now: datetime) -> datetime:
    """The day of the named month ("of march": its latest past one), of this or last month, or, named
    alone ("on the 5th"), of the latest month that has had it. A day past a month's end ("the 31st of
    april") is its last day."""
    if month:
        moment = _latest_start(_month_number(month), now) + relativedelta(day=day)
        return moment if moment <= now else moment - relativedelta(years=1)
    first = _span(now - relativedelta(months=int((which or "").lower() == "last")), "month")[0]
    moment = first + relativedelta(day=day)
    while which is None and (moment > now or moment.day != day):
        first -= relativedelta(months=1)
        moment = first + relativedelta(day=day)
    return moment


def _point_span(target: str, now: datetime) -> tuple[datetime, datetime] | None:
    """The calendar span a named point covers: a year, the latest month or season of that name not after `now`,
    or a day or month that dateparser reads (a day without a year is its latest past occurrence)."""
    if re.fullmatch(r"\d{4}", target):
        first = datetime(int(target), 1, 1, tzinfo=timezone.utc)
        return first, first + relativedelta(years=1)
    if target.lower() in HOLIDAYS:
        return _day(_holiday(target.lower(), None, now))
    if re.fullmatch(_MONTH, target, re.I):
        first = _latest_start(_month_number(target), now)
        return first, first + relativedelta(months=1)
    relative = re.fullmatch(r"(last|this)\s+(week|month|year)", target, re.I)
    if relative:  # "since last month": from the start of that calendar month
        unit = relative.group(2).lower()
        return _span(now - relativedelta(**{unit + "s": int(relative.group(1).lower() == "last")}), unit)
    season = re.fullmatch(rf"({_SEASON})\s+(?:of\s+)?(\d{{4}}|last|this)(?:\s+(?:year|yr))?", target, re.I)
    if season:
        first = datetime(_named_year(season.group(2), now), SEASONS[season.group(1).lower()][0], 1, tzinfo=timezone.utc)
        return first, first + relativedelta(months=3)
    if re.fullmatch(_SEASON, target, re.I):
        first = _latest_start(SEASONS[target.lower()][0], now)
        return first, first + relativedelta(months=3)
    named_year = re.fullmatch(rf"({_MONTH})\s+{_REL_YEAR}", target, re.I)
    if named_year:
        first = datetime(_named_year(target, now), _month_number(named_year.group(1)), 1, tzinfo=timezone.utc)
        return first, first + relativedelta(months=1)
    moment = _moment(target, now)
    if moment is None:
        return None
    by_month = re.fullmatch(rf"{_MONTH}\s+\d{{4}}", target, re.I)
    return _span(moment, "month" if by_month else "day")


def _bound(kind: str, target: str, now: datetime) -> tuple[datetime | None, datetime | None] | None:
    span = _point_span(target, now)
    if span is None:
        return None
    if kind == "before":
        return None, span[0]
    if kind == "until":
        return None, span[1]
    if kind == "after":
        return span[1], None
    return span[0], None


def _between(first: str, last: str, now: datetime) -> tuple[datetime, datetime] | None:
    """From the start of `first` to the end of `last`; a month without a year is read back from `last`."""
    end = _point_span(last, now)
    if end is None:
        return None
    start = _point_span(first, end[1] - timedelta(seconds=1))
    return None if start is None or start[0] >= end[1] else (start[0], end[1])


def _holiday(name: str, year: str | None, now: datetime) -> datetime:
    """The holiday's date in the year named, or its latest occurrence not after `now`."""
    month, day = HOLIDAYS[name]
    if year and year[0].isdigit():
        return datetime(int(year), month, day, tzinfo=timezone.utc)
    moment = datetime(now.year - (1 if year else 0), month, day, tzinfo=timezone.utc)
    return moment if year or moment <= now else moment - relativedelta(years=1)


_MONTH_OR = re.compile(rf"\b({_MONTH})\s+or\s+$", re.I)  # "feb or march": a month, as the one before it ("may or may not": no month)


def _is_verb_month(text: str, m: re.Match, group: int) -> bool:
    """Lower-case "may"/"march" with no word before it that introduces a date ("you may", "march on")."""
    return _reads_as_verb(text, m.start(group), m.group(group))


def _reads_as_verb(text: str, start: int, word: str) -> bool:
    """Whether "may"/"march" at `start` is a verb: no date word before it, nor a month (itself no verb) and "or"."""
    before = text[:start]
    if not _VERB_MONTH.match(word) or _MONTH_CUE.search(before):
        return False
    month = _MONTH_OR.search(before)
    return not (month and not _reads_as_verb(text, month.start(1), month.group(1)))


def find_time_phrases(text: str, now: datetime) -> list[tuple[TimeWindow, int, int]]:
    """Every time phrase in `text` as (window, start, end) character spans, left to right."""
    found: list[tuple[TimeWindow, int, int]] = []
    taken = [False] * len(text)
    for kind, pattern in PATTERNS:
        for m in pattern.finditer(text):
            if any(taken[m.start():m.end()]):
                continue
            if kind in ("month", "month_rel_year", "named_month") and _is_verb_month(text, m, 2 if kind == "named_month" else 1):
                continue
            window = _window(kind, m, now)
            if window is None:
                continue
            found.append((window, m.start(), m.end()))
            taken[m.start():m.end()] = [True] * (m.end() - m.start())
    return _alternatives_joined(text, sorted(found, key=lambda f: f[1]))


def _alternatives_joined(text: str, found: list[tuple[TimeWindow, int, int]]) -> list[tuple[TimeWindow, int, int]]:
    """"from 2024 or 2025", "in march or april": two windows joined by "or" are one window over both,
    not two that must both hold (which nothing can): touching spans, or months of any year."""
    joined: list[tuple[TimeWindow, int, int]] = []
    for window, start, end in found:
        first, first_start, first_end = joined[-1] if joined else (None, 0, 0)
        between = f"{text[first_end:start]} {window.words}".lower()
        if first is not None and re.fullmatch(r"[\s,]*or\s.*", between):
            words = text[first_start:end]
            if first.months and window.months and all(bound is None for bound in (first.start, first.end, window.start, window.end)):
                joined[-1] = (TimeWindow(words, months=tuple(sorted({*first.months, *window.months}))), first_start, end)
                continue
            if first.months and first.start is None and first.end is None and _one_month(window):
                # "sept or oct this year": the year said once is both months'
                year = window.start.replace(month=1)
                months = tuple(sorted({*first.months, window.start.month}))
                joined[-1] = (TimeWindow(words, year, year.replace(year=year.year + 1), months), first_start, end)
                continue
            if not (first.months or window.months) and None not in (first.start, first.end, window.start, window.end) \
                    and first.start <= window.end and window.start <= first.end:
                joined[-1] = (TimeWindow(words, min(first.start, window.start), max(first.end, window.end)), first_start, end)
                continue
        joined.append((window, start, end))
    return joined


EVENING_HOUR = 18
_EVENING = re.compile(r"tonight|this\s+evening", re.I)
_PART_OF_DAY = {"tonight": "today", "this morning": "today", "this afternoon": "today", "this evening": "today", "last night": "yesterday"}


def _one_month(window: TimeWindow) -> bool:
    """Whether a window is one calendar month of one year ("oct this year", "march 2025")."""
    start, end = window.start, window.end
    return not window.months and start is not None and end is not None and start.day == 1 and start.hour == 0 \
        and (end.year * 12 + end.month) - (start.year * 12 + start.month) == 1 and end.day == 1


def _unit(word: str) -> str:
    return _UNIT_NAMES.get(word.lower(), word.lower())


def _latest(which: str, month: int, months: int, now: datetime) -> tuple[datetime, datetime]:
    """"this past summer", "last spring", "this past may": the latest such span that has ended; "this
    autumn", "this june": the latest that has begun."""
    started = which.lower().split() == ["this"]
    year = now.year
    while (first := datetime(year, month, 1, tzinfo=timezone.utc)) + relativedelta(months=0 if started else months) > now:
        year -= 1
    return first, first + relativedelta(months=months)


def _count(words: str) -> int:
    """"3", "three", "a couple of": how many units a span counts."""
    words = words.lower()
    return int(words) if words.isdigit() else _COUNT_WORDS.get(re.sub(r"^a\s+|\s+of$", "", words), 1)


def _window(kind: str, m: re.Match, now: datetime) -> TimeWindow | None:
    words = m.group(0).strip()
    if kind == "between":  # "between march and september last year": the year belongs to both
        last = f"{m.group(2)} {m.group(3)}" if m.group(3) and re.fullmatch(_MONTH, m.group(2), re.I) else m.group(2)
        bounds = _between(m.group(1), last, now)
        return None if bounds is None else TimeWindow(words, *bounds)
    if kind == "rolling":
        start, _ = _day(now - relativedelta(**{_unit(m.group(2)) + "s": _count(m.group(1))}))
        return TimeWindow(words, start, None)
    if kind == "age":
        start, _ = _day(now - relativedelta(**{_unit(m.group(3)) + "s": _count(m.group(2))}))
        young = m.group(1).lower() in ("less", "under", "younger")
        return TimeWindow(words, start, None) if young else TimeWindow(words, None, start)
    if kind == "month_rel_year":
        first = datetime(_named_year(m.group(2), now), _month_number(m.group(1)), 1, tzinfo=timezone.utc)
        return TimeWindow(words, first, first + relativedelta(months=1))
    if kind == "not_within":
        return TimeWindow(m.group(1), None, _day(now - relativedelta(**{_unit(m.group(3)) + "s": _count(m.group(2))}))[0])
    if kind == "not_in":
        span = _point_span(m.group(2), now)
        return None if span is None else TimeWindow(m.group(1), None, span[0])
    if kind == "not_since":
        span = _point_span(m.group(2), now)
        return None if span is None else TimeWindow(m.group(1), *span)
    if kind == "open_bound":
        earlier = (m.group(2) or "").lower() in ("earlier", "before", "older", "prior")
        bounds = _bound("until" if earlier else "since", m.group(1), now)
        return None if bounds is None else TimeWindow(words, *bounds)
    if kind == "than":
        bounds = _bound(_THAN_BOUNDS[m.group(2).lower() in ("older", "earlier"), bool(m.group(1))], m.group(3), now)
        return None if bounds is None else TimeWindow(words, *bounds)
    if kind == "bound":
        bounds = _bound("since" if m.group(3) else m.group(1).lower(), m.group(2), now)
        return None if bounds is None else TimeWindow(words, *bounds)
    if kind == "day_of_month":
        day = int(m.group(1)[:-2])
        if not 1 <= day <= 31:
            return None
        if m.group(4):
            first = datetime(_named_year(m.group(4), now), _month_number(m.group(3)), 1, tzinfo=timezone.utc)
            return TimeWindow(words, *_day(first + relativedelta(day=day)))
        return TimeWindow(words, *_day(_day_of_month(day, m.group(2), m.group(3), now)))
    if kind == "date":
        moment = _moment(m.group(1), now)
        return None if moment is None else TimeWindow(words, *_day(moment))
    if kind == "before_last":
        unit = _unit(m.group(1))
        return TimeWindow(words, *_span(now - relativedelta(**{unit + "s": 2}), unit))
    if kind == "ago" and (vague := re.match(r"(?:a\s+)?(couple|few)\b", m.group(1), re.I)):
        # "a few days ago", "a couple weeks ago": about so long ago, so anywhere within twice that
        return TimeWindow(words, now - relativedelta(**{_unit(m.group(2)) + "s": 2 * _COUNT_WORDS[vague.group(1).lower()]}), now)
    if kind == "day" and _EVENING.fullmatch(m.group(1)) and now.hour < EVENING_HOUR:
        return None  # "make art tonight" before the evening: the evening to come, when no checkpoint was made
    if kind in ("ago", "relative", "day"):
        phrase = m.group(1).lower().replace("past ", "last ").replace("previous ", "last ")
        phrase = _PART_OF_DAY.get(re.sub(r"\s+", " ", phrase), phrase)  # "last night" is yesterday's
        phrase = re.sub(r"\w+$", lambda unit: _unit(unit.group()), phrase)
        if phrase.startswith("this "):
            return TimeWindow(words, *_span(now, phrase.split()[1]))
        moment = _moment(phrase, now)
        if moment is None:
            return None
        unit = "day" if kind == "day" else _unit(m.group(2) if kind == "ago" else m.group(3))
        if kind == "relative" and phrase == "last week":  # the calendar week before, or the seven days up to now: users mean either
            return TimeWindow(words, _span(moment, unit)[0], _day(now)[1])
        return TimeWindow(words, *_span(moment, unit))
    if kind == "season":
        months = SEASONS[m.group(2).lower()]
        if m.group(3):
            first = datetime(int(m.group(3)), months[0], 1, tzinfo=timezone.utc)
            return TimeWindow(words, first, first + relativedelta(months=3))
        if m.group(1):
            return TimeWindow(words, *_latest(m.group(1), months[0], 3, now))
        return TimeWindow(words, months=months)
    if kind == "named_month":
        month = _month_number(m.group(2))
        if m.group(1).lower().startswith("last"):
            if month < now.month:
                return None
            first = datetime(now.year - 1, month, 1, tzinfo=timezone.utc)
            return TimeWindow(words, first, first + relativedelta(months=1))
        return TimeWindow(words, *_latest(m.group(1), month, 1, now))
    if kind == "month_year":
        first = datetime(int(m.group(2)), _month_number(m.group(1)), 1, tzinfo=timezone.utc)
        return TimeWindow(words, first, first + relativedelta(months=1))
    if kind == "month":
        return TimeWindow(words, months=(_month_number(m.group(1)),))
    if kind == "month_part":
        month, day = _month_number(m.group(2)), MONTH_PARTS[m.group(1).lower()]
        # no year: the latest that has begun
        first = datetime(int(m.group(3)), month, day, tzinfo=timezone.utc) if m.group(3) else _latest_start(month, now, day)
        return TimeWindow(words, first, first + relativedelta(days=10) if day < 21 else first.replace(day=1) + relativedelta(months=1))
    if kind == "year_half":
        first = datetime(_named_year(m.group(2), now), 1 if m.group(1).lower() in ("first", "1st") else 7, 1, tzinfo=timezone.utc)
        return TimeWindow(words, first, first + relativedelta(months=6))
    if kind == "year_part":
        first = datetime(int(m.group(2)), YEAR_PARTS[m.group(1).lower()], 1, tzinfo=timezone.utc)
        return TimeWindow(words, first, first + relativedelta(months=4))
    if kind == "holiday":
        day = _holiday(m.group(2).lower(), m.group(3), now)
        return TimeWindow(words, *(_span(day, "month") if m.group(1) else _day(day)))
    if kind == "weekday":
        return TimeWindow(words, *_point_span(m.group(1), now))
    first = datetime(int(m.group(1)), 1, 1, tzinfo=timezone.utc)
    return TimeWindow(words, first, first + relativedelta(years=1))
