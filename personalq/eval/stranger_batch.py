"""Checks a batch of requests a stranger to the code wrote, before it joins the hand-written sets.

The sets measure what people type only if the people writing them never saw the parser, so batches
come from helpers given docs/checkin-stranger-brief.md and nothing else. What they cannot see they
check with this: their new catalog's words must appear in no code and no other catalog (else the
catalog tests the code's own vocabulary), and every request's hand annotation must select exactly
the answer written down (else the answer is a slip, not a judgement).

A batch folder holds `catalog.jsonl` (the new catalog, CATALOG_SIZE checkpoints), `requests.jsonl`
(requests over it) and `<catalog>.jsonl` for requests over an existing catalog (atelier or demo).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from personalq.eval.checkin_bench import read_jsonl
from personalq.store.card import CONTEXT_FIELDS
from personalq.eval.checkin_sets import DATA, annotated_ids, catalog_path

CATALOG_SIZE = 18
# What the store reads of a catalog line (last use optional: never used), and the sets' use count (data README).
CARD_KEYS = frozenset(CONTEXT_FIELDS) - {"last_used_at"} | {"use_count"}
PHRASE_CLASSES = frozenset({"negation", "version", "date", "usage", "synonym", "weak-synonym", "typo-slang", "common-words",
                            "absent-subject", "no-constraint", "follow-up", "follow-up-answer", "new-request", "order",
                            "description", "plain"})
CODE = Path(__file__).resolve().parents[1]


def catalog_terms(entries: list[dict]) -> set[str]:
    """A catalog's subjects, styles and places, lower case."""
    return {t.lower() for e in entries for t in (*e.get("subject_types", ()), *e.get("style_tags", ()), *e.get("environment", ()))}


def catalog_words(entries: list[dict]) -> set[str]:
    """A catalog's terms, whole and word by word: two catalogs sharing one word of a term test the same word."""
    terms = catalog_terms(entries)
    return terms | {w for t in terms for w in t.split()}


def terms_in_code(terms: set[str]) -> list[str]:
    """The terms the package's code names whole. A term's single words may be common English the code
    uses ("oil" of "oil painting"); the term itself is what a catalog asks the parser to read."""
    code = " ".join(p.read_text(encoding="utf-8").lower() for p in CODE.rglob("*.py"))
    return sorted(t for t in terms if re.search(rf"\b{re.escape(t)}\b", code))


def check_batch(folder: Path, others: Sequence[Path] = ()) -> list[str]:
    """One line per problem of a batch folder (none: it may join). `others`: catalogs written beside it."""
    catalog = read_jsonl(folder / "catalog.jsonl")
    problems = _catalog_problems(catalog) + _vocabulary_problems(folder.name, catalog, others)
    for path in sorted(folder.glob("*.jsonl")):
        if path.name != "catalog.jsonl":
            over = folder.name if path.stem == "requests" else path.stem
            entries = catalog if over == folder.name else read_jsonl(catalog_path(over))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if line.strip():
                    problems += [f"{path.name}:{n}: {p}" for p in _line_problems(line, over, entries)]
    return problems


def _line_problems(line: str, over: str, entries: list[dict]) -> list[str]:
    """A request line's problems; one that is no request at all is one problem, not a crash."""
    try:
        return _request_problems(json.loads(line), over, entries)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        return [f"not a request of the data README's format ({type(error).__name__}: {error})"]


def _catalog_problems(catalog: list[dict]) -> list[str]:
    problems = [] if len(catalog) == CATALOG_SIZE else [f"the catalog has {len(catalog)} checkpoints, not {CATALOG_SIZE}"]
    for e in catalog:
        if missing := CARD_KEYS - e.keys():
            problems.append(f"{e.get('id')}: missing {', '.join(sorted(missing))}")
        elif e["triggers"] != [f"<{e['id']}>"]:
            problems.append(f"{e['id']}: triggers must be ['<{e['id']}>']")
    return problems


def _vocabulary_problems(name: str, catalog: list[dict], others: Sequence[Path]) -> list[str]:
    """Words the code names, or another catalog (committed or written beside this one) uses; the folder's
    own name only may not be another catalog's (once joined, the sets' code lists it)."""
    committed = [p for p in DATA.glob("*/catalog.jsonl") if p.parent.name != name]
    used = set().union(*(catalog_words(read_jsonl(p)) for p in [*committed, *others]), {p.parent.name for p in committed})
    return [f"“{t}” is in the code" for t in terms_in_code(catalog_terms(catalog))] + [
        f"“{w}” is another catalog's" for w in sorted((catalog_words(catalog) | {name}) & used)]


def _request_problems(request: dict, over: str, entries: list[dict]) -> list[str]:
    truth, ids = request["ground_truth"], {e["id"] for e in entries}
    problems = [] if request.get("catalog") == over else [f"catalog must be {over!r}"]
    if not (request.get("query") and request.get("now") and request.get("classes")) or set(request["classes"]) - PHRASE_CLASSES:
        problems.append("needs query, now and known classes")
    hits = annotated_ids(entries, request["annotation"])
    if truth["requires_clarification"]:
        expected = set(truth["plausible_ids"])
        if len(expected) < 2 or not expected <= ids or truth["final_checkpoint_id"] not in expected or not truth["clarification_answer"]:
            problems.append("an ambiguous request needs 2+ plausible ids of the catalog, a clarification answer and a final id among them")
    elif truth["no_match"]:
        expected = set()
        if not truth.get("failing_constraint"):
            problems.append("a no-match needs failing_constraint words")
    else:
        expected = {truth["checkpoint_id"]}
        if truth["final_checkpoint_id"] != truth["checkpoint_id"]:
            problems.append("final_checkpoint_id must be checkpoint_id")
    if hits != expected:
        problems.append(f"the annotation selects {sorted(hits)}, the answer is {sorted(expected)}")
    return problems
