"""The Repo-Prompts generator, its oracle, the scorer and the check-in commands."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personalq.eval.checkin_bench import Prediction, score
from personalq.checkin.repo_prompts import generate
from personalq.checkin.repo_prompts.oracle import TimeSpec, time_matches
from personalq.checkin.repo_prompts.vocabularies import DEMO, UNSEEN

NOW = datetime(2025, 6, 30, 12, tzinfo=timezone.utc)  # a Monday
SMALL = dict(versions=3, singles=24, ambiguous=8, no_match=8)


def truth_kind(request):
    g = request["ground_truth"]
    return "ambiguous" if g["requires_clarification"] else "no_match" if g["no_match"] else "single"


def test_generator_is_seeded_and_fills_its_quotas():
    a, b, c = generate("demo", 3, **SMALL), generate("demo", 3, **SMALL), generate("demo", 4, **SMALL)
    assert a.catalog == b.catalog and a.requests == b.requests
    assert a.requests != c.requests
    kinds = [truth_kind(r) for r in a.requests]
    assert (kinds.count("single"), kinds.count("ambiguous"), kinds.count("no_match")) == (24, 8, 8)
    assert len({r["instance_id"] for r in a.requests}) == len(a.requests)
    assert len(a.catalog) == 20 * 3 and len({row["id"] for row in a.catalog}) == 60


def test_catalog_rows_follow_the_contract():
    data = generate("demo", 0, **SMALL)
    for row in data.catalog:
        assert {"id", "triggers", "subject_types", "description", "created_at"} <= set(row)
        assert row["subject_types"][0] == row["category"]
        datetime.fromisoformat(row["created_at"].replace("Z", "+00:00"))
    bears = sorted((r for r in data.catalog if r["category"] == "bear"), key=lambda r: r["created_at"])
    assert [r["version"] for r in bears] == [1, 2, 3], "versions are counted per category, oldest first"


def test_ambiguous_requests_carry_a_fair_answer():
    data = generate("demo", 1, **SMALL)
    for r in data.requests:
        g = r["ground_truth"]
        if g["requires_clarification"]:
            assert len(g["plausible_ids"]) >= 2 and g["final_checkpoint_id"] in g["plausible_ids"]
            assert g["clarification_answer"] and g["checkpoint_id"] is None
            assert not re.search(r"\w+-v\d+", g["clarification_answer"]), "answers are words, not ids"


@pytest.mark.parametrize("spec, inside, outside", [
    (TimeSpec("day", (1,)), "2025-06-29T23:59:00", "2025-06-30T00:01:00"),
    (TimeSpec("week", (1,)), "2025-06-23T00:00:00", "2025-06-30T00:00:00"),
    (TimeSpec("month_rel", (1,)), "2025-05-31T12:00:00", "2025-06-01T00:00:00"),
    (TimeSpec("season", ("winter",)), "2024-01-15T00:00:00", "2024-03-01T00:00:00"),
    (TimeSpec("season_year", ("spring", 2024)), "2024-05-31T00:00:00", "2025-04-01T00:00:00"),
    (TimeSpec("before", (5,)), "2025-04-30T23:00:00", "2025-05-01T00:00:00"),
    (TimeSpec("since", (9,)), "2024-09-01T00:00:00", "2024-08-31T23:00:00"),  # September is in 2024: Sept 2025 is after now
])
def test_oracle_time_windows(spec, inside, outside):
    moment = lambda s: datetime.fromisoformat(s).replace(tzinfo=timezone.utc)  # noqa: E731
    assert time_matches(spec, moment(inside), NOW)
    assert not time_matches(spec, moment(outside), NOW)


def test_unseen_vocabulary_appears_nowhere_in_the_checkin_code():
    """The generalization catalog is only a fair test if check-in cannot know its words."""
    words = set(UNSEEN["categories"]) | set(UNSEEN["styles"]) | set(UNSEEN["environments"]) | set(UNSEEN["colors"])
    for values in UNSEEN["categories"].values():
        words |= set(values["subtypes"]) | set(values["synonyms"])
    demo_words = set(DEMO["categories"]) | set(DEMO["styles"]) | set(DEMO["environments"])
    assert not words & demo_words
    package = Path(__file__).resolve().parents[1] / "personalq" / "checkin"
    lines = (line for p in package.glob("*.py") for line in p.read_text().lower().splitlines())
    code = " ".join(line for line in lines if not re.match(r"\s*(from|import)\s", line))  # module paths are not vocabulary
    leaked = sorted(w for w in words if re.search(rf"\b{re.escape(w)}\b", code))
    assert not leaked, f"check-in code names catalog words: {leaked}"


def test_score_counts_each_figure_by_the_spec():
    def req(i, kind, checkpoint=None, final=None):
        truth = {"checkpoint_id": checkpoint, "requires_clarification": kind == "ambiguous", "no_match": kind == "no_match",
                 "plausible_ids": [], "clarification_answer": "x" if kind == "ambiguous" else None, "final_checkpoint_id": final}
        return {"instance_id": f"r{i}", "query": "q", "ground_truth": truth}

    requests = [req(1, "single", "a"), req(2, "single", "b"), req(3, "ambiguous", final="c"),
                req(4, "ambiguous", final="d"), req(5, "no_match"), req(6, "no_match")]
    preds = [Prediction("r1", "select", "a", "select", "a", 1.0), Prediction("r2", "select", "x", "select", "x", 2.0),
             Prediction("r3", "clarify", None, "select", "c", 3.0), Prediction("r4", "no_match", None, "no_match", None, 4.0),
             Prediction("r5", "no_match", None, "no_match", None, 5.0), Prediction("r6", "clarify", None, "clarify", None, 6.0)]
    s = score(requests, preds)
    assert s["single_accuracy"] == 0.5
    assert s["ambiguity_recall"] == 0.5 and s["ambiguity_precision"] == 0.5
    assert s["post_clarification_accuracy"] == 0.5
    assert s["no_match_recall"] == 0.5 and s["no_match_precision"] == 0.5
    assert s["decision_accuracy"] == 3 / 6
    assert s["latency_ms_p50"] == 3.5


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    out = tmp_path_factory.mktemp("rp")
    result = CliRunner().invoke(_app(), ["bench", "checkin-generate", "--out-dir", str(out), "--seed", "5",
                                         "--versions", "3", "--singles", "24", "--ambiguous", "8", "--no-match", "8"])
    assert result.exit_code == 0, result.output
    return out


def _app():
    from personalq.cli import app

    return app


def test_bench_select_compares_methods(small_set, tmp_path):
    args = ["bench", "select", "--catalog", str(small_set / "catalog.jsonl"), "--prompts", str(small_set / "prompts.jsonl"),
            "--now", "2025-06-30T12:00:00Z", "--home", str(tmp_path / "home"), "--method", "all", "--json",
            "--out", str(tmp_path / "runs" / "pred.jsonl"), "--split", "none"]  # a folder not made yet
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert set(report) == {"repo-prompts"}
    rows = report["repo-prompts"]
    assert set(rows) == {"random", "dense", "bm25", "hybrid", "checkin"}
    for key in ("single_accuracy", "ambiguity_recall", "no_match_precision", "decision_accuracy", "latency_ms_p95"):
        assert key in rows["checkin"]
    for baseline in ("random", "dense", "bm25", "hybrid"):
        assert rows[baseline]["decision_accuracy"] < rows["checkin"]["decision_accuracy"]
    assert rows["checkin"]["decision_accuracy"] >= 0.8
    lines = (tmp_path / "runs" / "pred.checkin.jsonl").read_text().splitlines()
    assert len(lines) == 40 and {"instance_id", "action", "final_checkpoint_id"} <= set(json.loads(lines[0]))


def test_select_command_json_and_bad_input(small_set, tmp_path):
    home = tmp_path / "home"
    runner = CliRunner()
    assert runner.invoke(_app(), ["repo", "load-catalog", str(small_set / "catalog.jsonl"), "--home", str(home)]).exit_code == 0
    result = runner.invoke(_app(), ["select", "the oldest bear", "--home", str(home), "--json", "--now", "2025-06-30"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout[result.stdout.index("{"):])
    assert payload["action"] == "select" and payload["checkpoint_id"] == "bear-v1"
    assert payload["rewritten_prompt"] == "the oldest <bear-v1>"
    bad = runner.invoke(_app(), ["select", "the oldest bear", "--home", str(home), "--now", "last tuesday-ish"])
    assert bad.exit_code == 1 and "not an ISO-8601" in bad.output and len(bad.output.strip().splitlines()) == 1
    missing = runner.invoke(_app(), ["bench", "select", "--catalog", str(tmp_path / "nope.jsonl"), "--prompts", str(tmp_path / "nope.jsonl"),
                                     "--split", "none"])
    assert missing.exit_code == 1 and "no such file" in missing.output
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"instance_id": "rp_1", "query": "my bear"}\n')
    lacking = runner.invoke(_app(), ["bench", "select", "--catalog", str(small_set / "catalog.jsonl"), "--prompts", str(broken),
                                     "--home", str(home), "--split", "none"])
    assert lacking.exit_code == 1 and "request 1 lacks ground_truth" in lacking.output
