"""The Repo-Prompts benchmark: run a selection method over a request file and score it by the spec.

Baselines answer every request with a selection (they cannot ask or refuse), so they show what
retrieval alone gets right; `checkin` is the full deterministic pipeline, `checkin-llm` adds the
configured LiteLLM reranker.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from personalq.checkin.checkin import CheckIn, CheckInResult, _utc
from personalq.checkin.intent import parse_intent
from personalq.checkin.retrieval import hybrid_search
from personalq.eval.paired_stats import mcnemar

METHODS = ("random", "dense", "bm25", "hybrid", "checkin", "checkin-llm")
SCORES = ("single_accuracy", "ambiguity_recall", "ambiguity_precision", "post_clarification_accuracy",
          "no_match_recall", "no_match_precision", "no_match_reason_accuracy", "decision_accuracy", "all_the_way_accuracy",
          "all_the_way_ci95", "rewrite_accuracy", "latency_ms_p50", "latency_ms_p95")
WARMUP_REQUESTS = 20


@dataclass
class Prediction:
    instance_id: str
    action: str
    checkpoint_id: str | None
    final_action: str
    final_checkpoint_id: str | None
    latency_ms: float
    question: str | None = None
    rewritten_prompt: str | None = None
    reason: str = ""


def read_jsonl(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def select_only(checkpoint_id: str | None) -> CheckInResult:
    if checkpoint_id is None:
        return CheckInResult("no_match", "nothing retrieved")
    return CheckInResult("select", "top-1", checkpoint_id=checkpoint_id)


def make_method(name: str, store, checkin: CheckIn, llm_model: str | None = None, seed: int = 0) -> Callable:
    """A function (request dict, now) -> (first result, final result after any clarification)."""
    rng = random.Random(seed)
    pooled = lambda req: req.get("candidate_pool")  # noqa: E731

    if name in ("checkin", "checkin-llm"):
        runner = checkin
        if name == "checkin-llm":
            from personalq.checkin.rerank import LiteLLMReranker

            if not llm_model:
                raise ValueError("checkin-llm needs a model: --llm-model or PERSONALQ_CHECKIN_LLM")
            runner = CheckIn(store, k=checkin.k, reranker=LiteLLMReranker(llm_model))

        def full(req, now):
            conv = runner.conversation(now=now, candidate_pool=pooled(req))
            for turn in req.get("context", []):
                say(conv, turn)
            first = say(conv, req["query"])
            answer = req["ground_truth"].get("clarification_answer")
            final = conv.answer(answer) if first.action == "clarify" and answer else first
            return first, final

        return full

    def single_turn(pick):
        def run(req, now):
            result = pick(req, now)
            return result, result

        return run

    if name == "random":
        def pick_random(req, now):
            intent = parse_intent(req["query"], checkin.snapshot.vocabulary, now)
            ids = set(req.get("candidate_pool") or checkin.snapshot.ids)
            if intent.subject is not None:
                ids &= checkin.snapshot.matching(intent.subject)
            return select_only(rng.choice(sorted(ids)) if ids else None)

        return single_turn(pick_random)
    search = {
        "dense": lambda q, ids: store.dense_search(q, 1, ids=ids),
        "bm25": lambda q, ids: store.sparse_search(q, 1, ids=ids),
        "hybrid": lambda q, ids: hybrid_search(store, q, 1, ids=ids, depth=checkin.k * 5),
    }[name]
    return single_turn(lambda req, now: select_only(next((i for i, _ in search(req["query"], pooled(req))), None)))


def say(conversation, text: str) -> CheckInResult:
    """One typed message: the first starts the request; every later one goes to `Conversation.answer`,
    which decides whether it answers the open question, refines the choice, or starts a new request."""
    return conversation.answer(text) if conversation.last is not None else conversation.ask(text)


def run_method(method: Callable, requests: list[dict], default_now) -> list[Prediction]:
    for req in requests[:WARMUP_REQUESTS]:
        method(req, _utc(req.get("now") or default_now))
    predictions = []
    for req in requests:
        now = _utc(req.get("now") or default_now)
        t0 = time.perf_counter()
        first, final = method(req, now)
        latency = (time.perf_counter() - t0) * 1000
        predictions.append(Prediction(req["instance_id"], first.action, first.checkpoint_id, final.action,
                                      final.checkpoint_id, latency, first.question, final.rewritten_prompt, first.reason))
    return predictions


def _ratio(hits: int, total: int) -> float | None:
    return hits / total if total else None


def request_correct(request: dict, prediction: Prediction) -> bool:
    """Right all the way: the right id selected; a question whose answer ends on the right id; a no match."""
    truth = request["ground_truth"]
    if truth.get("requires_clarification"):
        return (prediction.action == "clarify" and prediction.final_action == "select"
                and prediction.final_checkpoint_id == truth["final_checkpoint_id"])
    if truth.get("no_match"):
        return prediction.action == "no_match"
    return prediction.action == "select" and prediction.checkpoint_id == truth["checkpoint_id"]


def wilson_interval(hits: int, total: int) -> list[float] | None:
    """The 95% Wilson score interval of hits/total: a set of 60 requests cannot tell 0.90 from 0.95."""
    if not total:
        return None
    interval = stats.binomtest(hits, total).proportion_ci(0.95, method="wilson")
    return [float(interval.low), float(interval.high)]


def paired_with(requests: list[dict], predictions: Iterable[Prediction], baseline: Iterable[Prediction]) -> dict:
    """Right all the way, request by request, against a baseline's predictions on the same requests:
    how many each got right, how many only one got right, and the exact McNemar p-value of that split."""
    now, before = {p.instance_id: p for p in predictions}, {p.instance_id: p for p in baseline}
    missing = [r["instance_id"] for r in requests if r["instance_id"] not in before]
    if missing:
        raise ValueError(f"the baseline has no prediction for {len(missing)} request(s), e.g. {missing[0]}")
    new = [request_correct(r, now[r["instance_id"]]) for r in requests]
    old = [request_correct(r, before[r["instance_id"]]) for r in requests]
    test = mcnemar(new, old)
    return {"right": sum(new), "baseline_right": sum(old), "only_now": test.only_a, "only_baseline": test.only_b,
            "mcnemar_p": test.p_value}


def names_failing_constraint(request: dict, prediction: Prediction) -> bool:
    """The no-match reason names the constraint that failed (any of the words the request lists for it)."""
    reason = prediction.reason.lower()
    return any(word.lower() in reason for word in request["ground_truth"]["failing_constraint"])


def class_accuracy(requests: list[dict], predictions: Iterable[Prediction]) -> dict[str, dict]:
    """Per phrase class (a request's `classes` labels): how many requests and the share right all the way."""
    by_id = {p.instance_id: p for p in predictions}
    counts: dict[str, list[int]] = {}
    for req in requests:
        right = request_correct(req, by_id[req["instance_id"]])
        for label in req.get("classes", []):
            tally = counts.setdefault(label, [0, 0])
            tally[0] += 1
            tally[1] += right
    return {label: {"requests": n, "accuracy": ok / n} for label, (n, ok) in sorted(counts.items())}


def score(requests: list[dict], predictions: Iterable[Prediction], triggers: dict[str, str] | None = None) -> dict:
    """Every score of docs/repo-prompts.md, plus rewrite_accuracy when the requests name their subject words
    and no_match_reason_accuracy when no-match requests name their failing constraint."""
    by_id = {p.instance_id: p for p in predictions}
    single = ambiguous = no_match = 0
    single_ok = amb_clarified = post_ok = nm_found = decision_ok = clarify_total = nm_total = 0
    rewrites = rewrite_ok = named = named_ok = 0
    for req in requests:
        truth, pred = req["ground_truth"], by_id[req["instance_id"]]
        clarify_total += pred.action == "clarify"
        nm_total += pred.action == "no_match"
        if truth.get("requires_clarification"):
            ambiguous += 1
            amb_clarified += pred.action == "clarify"
            decision_ok += pred.action == "clarify"
            post_ok += pred.final_action == "select" and pred.final_checkpoint_id == truth["final_checkpoint_id"]
        elif truth.get("no_match"):
            no_match += 1
            nm_found += pred.action == "no_match"
            decision_ok += pred.action == "no_match"
            if pred.action == "no_match" and truth.get("failing_constraint"):
                named += 1
                named_ok += names_failing_constraint(req, pred)
        else:
            single += 1
            right = pred.action == "select" and pred.checkpoint_id == truth["checkpoint_id"]
            single_ok += right
            decision_ok += right
            if right and triggers is not None and req.get("subject_words") is not None and pred.rewritten_prompt is not None:
                rewrites += 1
                text = pred.rewritten_prompt
                rewrite_ok += triggers[pred.checkpoint_id] in text and not any(
                    w.lower() in text.replace(triggers[pred.checkpoint_id], "").lower() for w in req["subject_words"])
    latencies = np.array([p.latency_ms for p in by_id.values()])
    right = sum(request_correct(req, by_id[req["instance_id"]]) for req in requests)
    return {
        "requests": len(requests),
        "single_accuracy": _ratio(single_ok, single),
        "ambiguity_recall": _ratio(amb_clarified, ambiguous),
        "ambiguity_precision": _ratio(amb_clarified, clarify_total),
        "post_clarification_accuracy": _ratio(post_ok, ambiguous),
        "no_match_recall": _ratio(nm_found, no_match),
        "no_match_precision": _ratio(nm_found, nm_total),
        "no_match_reason_accuracy": _ratio(named_ok, named),
        "decision_accuracy": _ratio(decision_ok, len(requests)),
        "all_the_way_accuracy": _ratio(right, len(requests)),
        "all_the_way_ci95": wilson_interval(right, len(requests)),
        "rewrite_accuracy": _ratio(rewrite_ok, rewrites),
        "latency_ms_p50": float(np.percentile(latencies, 50)) if len(latencies) else None,
        "latency_ms_p95": float(np.percentile(latencies, 95)) if len(latencies) else None,
    }


def format_table(rows: dict[str, dict]) -> str:
    """A Markdown table, methods as rows; a blank cell is a score with nothing to count (no clarify answers)."""
    head = "| method | " + " | ".join(SCORES) + " |"
    lines = [head, "|" + "---|" * (len(SCORES) + 1)]
    for method, scores in rows.items():
        cells = []
        for key in SCORES:
            value = scores.get(key)
            if value is None:
                cells.append("")
            elif isinstance(value, list):
                cells.append(f"{value[0]:.2f}-{value[1]:.2f}")
            else:
                cells.append(f"{value:.1f}" if key.startswith("latency") else f"{value:.3f}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_class_table(rows: dict[str, dict]) -> str:
    """Per-phrase-class accuracy as a Markdown table, classes as rows, methods as columns: 'accuracy (requests)'."""
    labels = sorted({label for scores in rows.values() for label in scores.get("classes", {})})
    lines = ["| phrase class | " + " | ".join(rows) + " |", "|" + "---|" * (len(rows) + 1)]
    for label in labels:
        cells = []
        for scores in rows.values():
            cell = scores.get("classes", {}).get(label)
            cells.append("" if cell is None else f"{cell['accuracy']:.3f} ({cell['requests']})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
