"""Generate a Repo-Prompts catalog and request set (docs/repo-prompts.md), seeded and reproducible.

The generator first samples structured constraints from a target checkpoint, asks the oracle which
checkpoints satisfy them, and only then renders the request in words; the ground truth therefore
comes from the spec applied to the catalog, never from the check-in code.
"""

from __future__ import annotations

import calendar
import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from personalq.checkin.repo_prompts.oracle import Constraint, TimeSpec, resolve, satisfies
from personalq.checkin.repo_prompts.vocabularies import VOCABULARIES

DEFAULT_NOW = datetime(2025, 6, 30, 12, 0, tzinfo=timezone.utc)
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
ORDINAL_WORDS = ["zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"]
ORDER_WORDS = {("created", "max"): ["latest", "newest", "most recent"], ("created", "min"): ["oldest", "first", "earliest"]}
GENERIC_HEADS = ["model", "checkpoint", "one", "LoRA"]


@dataclass
class RepoPromptsSet:
    catalog: list[dict]
    requests: list[dict]

    def write(self, catalog_path: str | Path, prompts_path: str | Path) -> None:
        for path, rows in ((catalog_path, self.catalog), (prompts_path, self.requests)):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")


def _iso(dt: datetime | None) -> str | None:
    return None if dt is None else dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def build_records(vocab: dict, rng: random.Random, now: datetime, versions: int) -> list[dict]:
    """Structured checkpoints: what the oracle reads. Catalog rows are rendered from these."""
    start = now - timedelta(days=730)
    records = []
    for category, words in vocab["categories"].items():
        times = sorted(start + timedelta(seconds=rng.uniform(0, 730 * 86400 - 3600)) for _ in range(versions))
        for version, created in enumerate(times, start=1):
            created = created.replace(microsecond=0)
            used = None
            if rng.random() < 0.75:
                back = timedelta(days=min(rng.expovariate(1 / 40), (now - created).days))
                used = max(created, now - back).replace(microsecond=0)
            records.append({
                "id": f"{category.replace(' ', '-')}-v{version}",
                "category": category,
                "subtype": rng.choice(words["subtypes"]),
                "style": rng.choice(list(vocab["styles"])),
                "environment": rng.choice(list(vocab["environments"])),
                "color": rng.choice(vocab["colors"]),
                "pose": rng.choice(vocab["poses"]),
                "version": version,
                "created": created,
                "used": used,
            })
    return records


def catalog_row(record: dict, vocab: dict, rng: random.Random) -> dict:
    """One catalog line, with a description worded the way a captioning model writes them."""
    look = f"a {record['color']} {record['subtype']}" if rng.random() < 0.5 else f"a {record['subtype']} in {record['color']} tones"
    place = rng.choice(vocab["environments"][record["environment"]])
    description = f"{vocab['style_openers'][record['style']]} {look} {record['pose']}, {place}."
    return {
        "id": record["id"],
        "triggers": [f"<{record['id']}>"],
        "subject_types": [record["category"], record["subtype"]],
        "style_tags": [record["style"]],
        "description": description,
        "created_at": _iso(record["created"]),
        "version": record["version"],
        "environment": [record["environment"]],
        "last_used_at": _iso(record["used"]),
        "category": record["category"],
        "base_model": "sd15",
        "kind": rng.choice(["lora", "lora", "dreambooth", "textual_inversion"]),
    }


class RequestWriter:
    """Samples constraint sets and renders them as requests a user might type."""

    def __init__(self, vocab: dict, records: list[dict], rng: random.Random, now: datetime):
        self.vocab, self.records, self.rng, self.now = vocab, records, rng, now

    # -- sampling -----------------------------------------------------------------------------
    def time_spec_for(self, when: datetime) -> TimeSpec | None:
        r, now = self.rng, self.now
        age = (now.date() - when.date()).days
        options = [TimeSpec("month", (when.month,)), TimeSpec("month_year", (when.month, when.year)),
                   TimeSpec("year", (when.year,)), TimeSpec("date", (when.year, when.month, when.day))]
        season = next(s for s, months in (("spring", (3, 4, 5)), ("summer", (6, 7, 8)), ("autumn", (9, 10, 11)), ("winter", (12, 1, 2))) if when.month in months)
        options.append(TimeSpec("season", (season,)))
        if season != "winter":
            options.append(TimeSpec("season_year", (season, when.year)))
        if age <= 6:
            options += [TimeSpec("day", (age,))] * 3
        ref_monday = now.date() - timedelta(days=now.weekday())
        weeks = (ref_monday - (when.date() - timedelta(days=when.weekday()))).days // 7
        if weeks <= 3:
            options += [TimeSpec("week", (weeks,))] * 2
        months = (now.year - when.year) * 12 + now.month - when.month
        if months <= 1:
            options += [TimeSpec("month_rel", (months,))] * 2
        bound = r.randint(1, 12)
        start = datetime(now.year, bound, 1, tzinfo=timezone.utc)
        if start > now:
            start = start.replace(year=now.year - 1)
        options.append(TimeSpec("before" if when < start else "since", (bound,)))
        return r.choice(options)

    def sample_constraints(self, target: dict) -> list[Constraint]:
        r = self.rng
        cs: list[Constraint] = []
        subject_roll = r.random()
        if subject_roll < 0.55:
            cs.append(Constraint("category", target["category"]))
        elif subject_roll < 0.75:
            cs.append(Constraint("subtype", target["subtype"]))
        elif subject_roll < 0.87 and self.vocab["categories"][target["category"]]["synonyms"]:
            cs.append(Constraint("synonym", target["category"]))
        extra = r.sample(["style", "environment", "color", "version", "created", "used", "order", "created", "style"], k=r.choice([1, 1, 2, 2, 3]))
        for kind in dict.fromkeys(extra):
            if kind == "version":
                cs.append(Constraint("version", target["version"]))
            elif kind == "created":
                cs.append(Constraint("created", self.time_spec_for(target["created"])))
            elif kind == "used":
                if target["used"] is not None:
                    cs.append(Constraint("used", self.time_spec_for(target["used"])))
            elif kind == "order":
                cs.append(Constraint("order", ("created", r.choice(["max", "min"]))))
            else:
                cs.append(Constraint(kind, target[kind]))
        return cs

    # -- rendering ----------------------------------------------------------------------------
    def time_words(self, spec: TimeSpec, use: bool) -> str:
        r, a = self.rng, spec.args
        month = lambda m: calendar.month_name[m]  # noqa: E731
        if spec.unit == "day":
            phrase = {0: "today", 1: "yesterday"}.get(a[0]) or f"{r.choice([str(a[0]), NUMBER_WORDS[a[0]]])} days ago"
        elif spec.unit == "week":
            phrase = {0: "this week", 1: "last week"}.get(a[0]) or f"{NUMBER_WORDS[a[0]]} weeks ago"
        elif spec.unit == "month_rel":
            phrase = {0: "this month", 1: "last month"}[a[0]]
        elif spec.unit == "month":
            phrase = f"in {month(a[0])}"
        elif spec.unit == "month_year":
            phrase = f"in {month(a[0])} {a[1]}"
        elif spec.unit == "season":
            phrase = f"in the {a[0]}" if r.random() < 0.5 else f"in {a[0]}"
        elif spec.unit == "season_year":
            phrase = f"in {a[0]} {a[1]}"
        elif spec.unit == "year":
            phrase = f"in {a[0]}"
        elif spec.unit == "before":
            phrase = f"before {month(a[0])}"
        elif spec.unit == "since":
            phrase = f"since {month(a[0])}"
        else:
            phrase = f"on {month(a[1])} {a[2]}, {a[0]}"
        if use:
            return f"I used {phrase}"
        return f"{r.choice(['created', 'made', 'trained'])} {phrase}"

    def render(self, cs: list[Constraint]) -> tuple[str, list[str]]:
        """Request text and the words of it that name the subject (for the rewrite check)."""
        r, v = self.rng, self.vocab
        by = {c.kind: c.value for c in cs}
        if "category" in by:
            noun = by["category"]
        elif "synonym" in by:
            noun = r.choice(v["categories"][by["synonym"]]["synonyms"])
        elif "subtype" in by:
            noun = by["subtype"]
        else:
            noun = None
        head = noun or r.choice(GENERIC_HEADS)
        before: list[str] = []
        after: list[str] = []
        if "order" in by:
            before.append(r.choice(ORDER_WORDS[by["order"]]))
        if "style" in by:
            synonyms = v["styles"][by["style"]]
            style = r.choice(synonyms) if synonyms and r.random() < 0.25 else by["style"]
            if r.random() < 0.6:
                before.append(style)
            else:
                after.append(f"in {style} style" if r.random() < 0.5 else f"in the {style} style")
        if "color" in by:
            before.append(by["color"])
        core = " ".join([*before, head])
        if "environment" in by:
            after.append(r.choice(v["environment_requests"][by["environment"]]))
        if "created" in by:
            after.append(self.time_words(by["created"], use=False))
        if "used" in by:
            after.append(self.time_words(by["used"], use=True))
        text = " ".join([core, *after])
        if "version" in by:
            n = by["version"]
            form = r.random()
            if form < 0.4:
                text = f"{core} v{n} " + " ".join(after)
            elif form < 0.7:
                text = f"{text}, version {n}"
            elif n < len(ORDINAL_WORDS) and "order" not in by:
                text = f"the {ORDINAL_WORDS[n]} version of my {text}"
            else:
                text = f"{text} version {n}"
        if not text.startswith("the "):
            text = r.choice(["my {}", "use my {}", "the {}", "{}", "I want the {}", "a picture of my {}", "my {}, please"]).format(text.strip())
        if r.random() < 0.3:
            text = f"{text} {r.choice(v['scenes'])}"
        return " ".join(text.split()), [noun] if noun else []

    def answer_for(self, target: dict, plausible: list[dict]) -> str | None:
        """A fair free-text answer: one attribute of the target that no other plausible checkpoint shares."""
        r, v = self.rng, self.vocab
        kinds = ["style", "environment", "color", "subtype", "version"]
        r.shuffle(kinds)
        for kind in kinds:
            if kind == "version" and len({p["category"] for p in plausible}) > 1:
                continue
            if sum(p[kind] == target[kind] for p in plausible) == 1:
                value = target[kind]
                if kind == "environment":
                    text = f"the one {r.choice(v['environment_requests'][value])}"
                elif kind == "subtype":
                    text = f"the {value}"
                elif kind == "version":
                    text = r.choice([f"version {value}", f"v{value}"])
                else:
                    text = f"the {value} one"
                return text, Constraint(kind, value)
        return None


def generate(vocabulary: str = "demo", seed: int = 0, now: datetime = DEFAULT_NOW, versions: int = 50,
             singles: int = 350, ambiguous: int = 100, no_match: int = 50, max_attempts: int = 200_000) -> RepoPromptsSet:
    """Sample until each quota is met (or `max_attempts` samples: huge catalogs rarely give small ambiguous sets)."""
    vocab = VOCABULARIES[vocabulary]
    rng = random.Random(seed)
    records = build_records(vocab, rng, now, versions)
    catalog = [catalog_row(rec, vocab, rng) for rec in records]
    writer = RequestWriter(vocab, records, rng, now)
    want = {"single": singles, "ambiguous": ambiguous, "no_match": no_match}
    got: dict[str, list[dict]] = {k: [] for k in want}
    seen: set[str] = set()
    now_iso = _iso(now)
    for _ in range(max_attempts):
        if all(len(got[k]) >= want[k] for k in want):
            break
        target = rng.choice(records)
        cs = writer.sample_constraints(target)
        mode = rng.random()
        if mode < 0.12 and len(got["no_match"]) < no_match:
            cs = _break(cs, writer, rng, target)
            if cs is None:
                continue
        hits = resolve(records, cs, now)
        text, nouns = writer.render(cs) if not any(c.kind == "absent" for c in cs) else _render_absent(cs, writer)
        if text in seen:
            continue
        truth = {"checkpoint_id": None, "requires_clarification": False, "no_match": False,
                 "plausible_ids": [], "clarification_answer": None, "final_checkpoint_id": None}
        if not hits:
            kind = "no_match"
            truth["no_match"] = True
        elif len(hits) == 1:
            kind = "single"
            truth["checkpoint_id"] = hits[0]["id"]
        else:
            kind = "ambiguous"
            if len(hits) > 10 or target not in hits:
                continue
            fair = writer.answer_for(target, hits)
            if fair is None:
                continue
            answer, extra = fair
            if [h["id"] for h in hits if satisfies(h, extra, now)] != [target["id"]]:
                continue
            truth.update(requires_clarification=True, plausible_ids=[h["id"] for h in hits],
                         clarification_answer=answer, final_checkpoint_id=target["id"])
        if len(got[kind]) >= want[kind]:
            continue
        seen.add(text)
        got[kind].append({"query": text, "now": now_iso, "ground_truth": truth,
                          "constraints": sorted({c.kind for c in cs}), "subject_words": nouns})
    requests = [*got["single"], *got["ambiguous"], *got["no_match"]]
    rng.shuffle(requests)
    for i, req in enumerate(requests, start=1):
        req["instance_id"] = f"rp_{i:03d}"
    requests = [{"instance_id": q.pop("instance_id"), **q} for q in requests]
    return RepoPromptsSet(catalog, requests)


def _break(cs: list[Constraint], writer: RequestWriter, rng: random.Random, target: dict) -> list[Constraint] | None:
    """Turn a satisfiable constraint set into one that (likely) nothing satisfies."""
    v = writer.vocab
    roll = rng.random()
    if roll < 0.3:
        return [Constraint("absent", rng.choice(v["absent"])), *[c for c in cs if c.kind in ("style", "created", "environment")]]
    if roll < 0.45:
        top = writer.records[-1]["version"]
        return [*[c for c in cs if c.kind != "version"], Constraint("version", rng.randint(top + 1, max(99, top + 49)))]
    swappable = [c for c in cs if c.kind in ("style", "environment", "color", "created")]
    if not swappable:
        return None
    old = rng.choice(swappable)
    if old.kind == "created":
        new = Constraint("created", writer.time_spec_for(writer.rng.choice(writer.records)["created"]))
    else:
        pool = {"style": list(v["styles"]), "environment": list(v["environments"]), "color": v["colors"]}[old.kind]
        new = Constraint(old.kind, rng.choice([p for p in pool if p != old.value]))
    return [new if c is old else c for c in cs]


def _render_absent(cs: list[Constraint], writer: RequestWriter) -> tuple[str, list[str]]:
    noun = next(c.value for c in cs if c.kind == "absent")
    rest = [c for c in cs if c.kind != "absent"]
    text, _ = writer.render([Constraint("subtype", noun), *rest])
    return text, [noun]
