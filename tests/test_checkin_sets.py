"""The hand-written Check-in sets: their split, their answers against their catalogs, the metrics and the harness."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from personalq.eval.checkin_bench import Prediction, class_accuracy, make_method, read_jsonl, request_correct, score
from personalq.checkin.checkin import CheckInResult
from personalq.eval.checkin_sets import (
    CATALOGS,
    EXTRA,
    EXTRA_CATALOGS,
    HOLDOUT,
    HOLDOUT_CATALOGS,
    SEED,
    annotated_ids,
    catalog_path,
    load_split,
    named_sets,
    split_requests,
    stratum,
)
from personalq.eval.stranger_batch import catalog_terms, terms_in_code

# The phrase classes of issue 22; every one is covered on every catalog.
PHRASE_CLASSES = {"negation", "version", "date", "usage", "synonym", "weak-synonym", "typo-slang", "common-words",
                  "absent-subject", "no-constraint", "follow-up", "follow-up-answer", "new-request"}


def requests_of(catalog: str) -> list[dict]:
    return load_split(catalog, "dev") + load_split(catalog, "test")


@pytest.mark.parametrize("catalog", CATALOGS)
def test_committed_split_is_the_seeded_draw(catalog):
    dev, test = load_split(catalog, "dev"), load_split(catalog, "test")
    everything = dev + test
    assert split_requests(everything) == (dev, test)
    assert split_requests(list(reversed(everything))) == (dev, test), "the draw does not depend on input order"
    assert split_requests(everything, SEED + 1) != (dev, test)
    assert abs(len(dev) - len(test)) <= 1
    dev_strata, test_strata = Counter(map(stratum, dev)), Counter(map(stratum, test))
    for key in dev_strata | test_strata:
        assert abs(dev_strata[key] - test_strata[key]) <= 1, key


@pytest.mark.parametrize("catalog, requests_of", [*((c, requests_of) for c in CATALOGS),
                                                  *((c, lambda c: load_split(c, EXTRA)) for c in EXTRA_CATALOGS),
                                                  *((c, lambda c: load_split(c, HOLDOUT)) for c in HOLDOUT_CATALOGS)])
def test_every_expected_answer_names_checkpoints_of_its_catalog(catalog, requests_of):
    ids = {row["id"] for row in read_jsonl(catalog_path(catalog))}
    requests = requests_of(catalog)
    assert len({r["instance_id"] for r in requests}) == len(requests)
    for r in requests:
        truth = r["ground_truth"]
        assert r["catalog"] == catalog and r["now"] and r["classes"]
        if truth["requires_clarification"]:
            assert len(truth["plausible_ids"]) >= 2 and set(truth["plausible_ids"]) <= ids
            assert truth["final_checkpoint_id"] in truth["plausible_ids"] and truth["clarification_answer"]
        elif truth["no_match"]:
            assert truth["checkpoint_id"] is None
        else:
            assert truth["checkpoint_id"] in ids, r["instance_id"]


def test_sets_are_large_enough_and_cover_every_phrase_class():
    assert sum(len(requests_of(c)) for c in CATALOGS) >= 360
    for catalog in CATALOGS:
        requests = requests_of(catalog)
        kinds = Counter(stratum(r)[0] for r in requests)
        assert min(kinds["single"], kinds["ambiguous"], kinds["no_match"]) >= 20, (catalog, kinds)
        labels = Counter(label for r in requests for label in r["classes"])
        assert {label for label, n in labels.items() if n >= 6} >= PHRASE_CLASSES, (catalog, labels)


@pytest.mark.parametrize("catalog, requests_of", [*((c, requests_of) for c in CATALOGS),
                                                  *((c, lambda c: load_split(c, EXTRA)) for c in EXTRA_CATALOGS),
                                                  *((c, lambda c: load_split(c, HOLDOUT)) for c in HOLDOUT_CATALOGS)])
def test_expected_answers_follow_from_the_annotated_constraints(catalog, requests_of):
    entries = read_jsonl(catalog_path(catalog))
    for r in [r for r in requests_of(catalog) if "annotation" in r]:  # the older extra requests carry none
        truth, hits = r["ground_truth"], annotated_ids(entries, r["annotation"])
        if truth["requires_clarification"]:
            assert hits == set(truth["plausible_ids"]), r["instance_id"]
        elif truth["no_match"]:
            assert not hits, r["instance_id"]
        else:
            assert hits == {truth["checkpoint_id"]}, r["instance_id"]


# Every hand-written catalog but the demo repository and `workshop`, the two whose words the code may
# name (the data README says which): each new catalog is listed once, in checkin_sets.
UNSEEN_CATALOGS = sorted((set(EXTRA_CATALOGS) | set(HOLDOUT_CATALOGS)) - {"demo", "workshop"})


@pytest.mark.parametrize("catalog", UNSEEN_CATALOGS)
def test_unseen_catalog_vocabulary_appears_nowhere_in_the_code(catalog):
    """Its subjects, styles and places test reading the catalog's own words only if no code names them
    (the rule `personalq bench checkin-batch` applies to a new batch)."""
    leaked = terms_in_code(catalog_terms(read_jsonl(catalog_path(catalog))))
    assert not leaked, f"the code names {catalog} words: {leaked}"


def _request(i, kind, checkpoint=None, final=None, classes=(), failing=None):
    truth = {"checkpoint_id": checkpoint, "requires_clarification": kind == "ambiguous", "no_match": kind == "no_match",
             "plausible_ids": [], "clarification_answer": "x" if kind == "ambiguous" else None, "final_checkpoint_id": final}
    if failing:
        truth["failing_constraint"] = failing
    return {"instance_id": f"r{i}", "query": "q", "classes": list(classes), "ground_truth": truth}


def test_per_class_accuracy_and_the_no_match_reason_on_a_known_example():
    requests = [_request(1, "single", "a", classes=["date"]), _request(2, "single", "b", classes=["date", "typo-slang"]),
                _request(3, "ambiguous", final="c", classes=["typo-slang"]), _request(4, "ambiguous", final="d", classes=["negation"]),
                _request(5, "no_match", classes=["absent-subject"], failing=["spaceship"]),
                _request(6, "no_match", classes=["absent-subject"], failing=["guitar"])]
    preds = [Prediction("r1", "select", "a", "select", "a", 1.0), Prediction("r2", "select", "x", "select", "x", 1.0),
             Prediction("r3", "clarify", None, "select", "c", 1.0), Prediction("r4", "clarify", None, "select", "z", 1.0),
             Prediction("r5", "no_match", None, "no_match", None, 1.0, reason="nothing is a Spaceship"),
             Prediction("r6", "no_match", None, "no_match", None, 1.0, reason="nothing is watercolor")]
    assert [request_correct(r, p) for r, p in zip(requests, preds)] == [True, False, True, False, True, True]
    assert class_accuracy(requests, preds) == {
        "absent-subject": {"requests": 2, "accuracy": 1.0}, "date": {"requests": 2, "accuracy": 0.5},
        "negation": {"requests": 1, "accuracy": 0.0}, "typo-slang": {"requests": 2, "accuracy": 0.5}}
    scores = score(requests, preds)
    assert scores["no_match_reason_accuracy"] == 0.5
    assert scores["ambiguity_recall"] == 1.0 and scores["post_clarification_accuracy"] == 0.5


class _RecordingConversation:
    """Stands in for Check-in's conversation: answers every message with a question, records which call got it."""

    def __init__(self):
        self.calls, self.last = [], None

    def ask(self, text):
        return self._reply("ask", text)

    def answer(self, text):
        return self._reply("answer", text)

    def _reply(self, how, text):
        self.calls.append((how, text))
        self.last = CheckInResult("clarify", "which one?")
        return self.last


def test_the_harness_types_earlier_turns_into_the_same_conversation():
    conversation = _RecordingConversation()

    class FakeCheckIn:
        def conversation(self, now, candidate_pool=None):
            return conversation

    run = make_method("checkin", store=None, checkin=FakeCheckIn())
    request = _request(1, "ambiguous", final="c")
    request.update(query="no, the realistic one", context=["my bear", "the one from may"])
    first, final = run(request, now=None)
    assert conversation.calls == [("ask", "my bear"), ("answer", "the one from may"), ("answer", "no, the realistic one"),
                                  ("answer", "x")]
    assert first.action == final.action == "clarify"


def test_bench_select_scores_dev_alone_per_catalog(tmp_path, monkeypatch):
    from personalq.cli import app

    monkeypatch.setenv("PERSONALQ_HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["bench", "select", "--split", "dev", "--method", "bm25", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert set(report) == {f"{c}/dev" for c in CATALOGS}
    for catalog in CATALOGS:
        scores = report[f"{catalog}/dev"]["bm25"]
        assert scores["requests"] == len(load_split(catalog, "dev"))
        assert sum(c["requests"] for c in scores["classes"].values()) >= scores["requests"]
    assert named_sets(EXTRA) == [(c, EXTRA) for c in EXTRA_CATALOGS]  # tuning requests beside the frozen split
    assert named_sets(HOLDOUT) == [(c, HOLDOUT) for c in HOLDOUT_CATALOGS]
    assert set(named_sets("all")) == {(c, s) for c in CATALOGS for s in ("dev", "test")}
    bad = CliRunner().invoke(app, ["bench", "select", "--split", "train"])
    assert bad.exit_code == 1 and "--split train" in bad.output


def test_bench_select_compares_with_a_baseline_request_by_request(tmp_path, monkeypatch):
    from personalq.cli import app

    monkeypatch.setenv("PERSONALQ_HOME", str(tmp_path / "home"))
    first = CliRunner().invoke(app, ["bench", "select", "--split", "dev", "--method", "random", "--out", str(tmp_path / "r.jsonl")])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(app, ["bench", "select", "--split", "dev", "--method", "random", "--baseline", str(tmp_path / "r.jsonl")])
    assert again.exit_code == 0, again.output
    assert again.output.count("only now 0, only before 0, exact McNemar p = 1") == len(CATALOGS)  # seeded: the same answers
    missing = CliRunner().invoke(app, ["bench", "select", "--split", "dev", "--baseline", str(tmp_path / "none.jsonl")])
    assert missing.exit_code == 1 and "--baseline: no predictions at" in missing.output
    (tmp_path / "r.demo-dev.jsonl").write_text((tmp_path / "r.demo-dev.jsonl").read_text().splitlines()[0] + "\n")
    short = CliRunner().invoke(app, ["bench", "select", "--split", "dev", "--method", "random", "--baseline", str(tmp_path / "r.jsonl")])
    assert short.exit_code == 1 and "the baseline has no prediction for" in short.output and "Traceback" not in short.output


def test_all_the_way_accuracy_carries_its_interval_and_a_paired_comparison_counts_each_side():
    from personalq.eval.checkin_bench import paired_with, wilson_interval

    low, high = wilson_interval(57, 66)
    assert 0.75 < low < 57 / 66 < high < 0.94 and wilson_interval(0, 0) is None
    requests = [_request(i, "no_match") for i in range(4)]
    now = [Prediction(f"r{i}", "no_match" if i < 3 else "select", None, "select", None, 1.0) for i in range(4)]
    before = [Prediction(f"r{i}", "no_match" if i == 3 else "select", None, "select", None, 1.0) for i in range(4)]
    paired = paired_with(requests, now, before)
    assert (paired["right"], paired["baseline_right"], paired["only_now"], paired["only_baseline"]) == (3, 1, 3, 1)
    assert paired["mcnemar_p"] == pytest.approx(0.625)
