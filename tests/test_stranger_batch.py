"""`personalq bench checkin-batch`: what a stranger's batch must pass before it joins the hand-written sets."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from personalq.cli import app
from personalq.eval.stranger_batch import check_batch


def _card(n: int, subject: str, style: str, place: str) -> dict:
    return {"id": f"{subject}-v{n}", "triggers": [f"<{subject}-v{n}>"], "subject_types": [subject], "style_tags": [style],
            "description": f"A {subject} drawn as {style} at the {place}.", "created_at": f"2025-0{n}-01T10:00:00Z", "version": n,
            "environment": [place], "category": subject, "base_model": "sd15", "kind": "lora", "use_count": 0}


# Six made-up subjects, three versions each: no code and no catalog uses these words.
SUBJECTS = ("zorbleck", "quimbat", "flaxwort", "drenmoth", "plivver", "snorkhen")


def _batch(tmp_path, style="glimmerprint", requests=None):
    folder = tmp_path / "zyxwold"
    folder.mkdir(parents=True)
    cards = [_card(n, s, style if n == 1 else "murkwash", "bramblegate") for s in SUBJECTS for n in (1, 2, 3)]
    (folder / "catalog.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cards))
    request = {"instance_id": "zyxwold-q101", "catalog": "zyxwold", "query": "the glimmerprint zorbleck", "now": "2026-11-20T15:00:00Z",
               "classes": ["plain"], "annotation": f"cat=zorbleck style={style}",
               "ground_truth": {"checkpoint_id": "zorbleck-v1", "requires_clarification": False, "no_match": False,
                                "plausible_ids": ["zorbleck-v1"], "clarification_answer": None, "final_checkpoint_id": "zorbleck-v1"}}
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (requests or [request])))
    return folder, request


def test_a_batch_of_new_words_whose_annotations_select_their_answers_may_join(tmp_path):
    folder, _ = _batch(tmp_path)
    assert check_batch(folder) == []
    result = CliRunner().invoke(app, ["bench", "checkin-batch", str(folder)])
    assert result.exit_code == 0 and "may join" in result.output
    result = CliRunner().invoke(app, ["bench", "checkin-batch", str(tmp_path / "nowhere")])  # refused in one line
    assert result.exit_code == 1 and "catalog.jsonl" in result.output and "Traceback" not in result.output


def test_an_annotation_that_selects_another_answer_is_refused(tmp_path):
    _, request = _batch(tmp_path / "first")
    request = {**request, "annotation": "cat=zorbleck"}  # all three versions, where the answer names one
    folder, _ = _batch(tmp_path, requests=[request])
    assert check_batch(folder) == ["requests.jsonl:1: the annotation selects ['zorbleck-v1', 'zorbleck-v2', 'zorbleck-v3'], "
                                   "the answer is ['zorbleck-v1']"]
    assert CliRunner().invoke(app, ["bench", "checkin-batch", str(folder)]).exit_code == 1
    with open(folder / "requests.jsonl", "a") as lines:  # a line that is no request is a problem, not a crash
        lines.write(json.dumps({"instance_id": "zyxwold-q102", "query": "the zorbleck"}) + "\n{not json\n")
    problems = check_batch(folder)
    assert [p.split(" (")[0] for p in problems[1:]] == ["requests.jsonl:2: not a request of the data README's format",
                                                       "requests.jsonl:3: not a request of the data README's format"]


def test_words_the_code_or_another_catalog_uses_are_refused(tmp_path):
    folder, _ = _batch(tmp_path / "code", style="watercolor")  # the parser names watercolor
    assert "“watercolor” is in the code" in check_batch(folder)
    folder, _ = _batch(tmp_path / "term", style="watercolor glimmer")  # a term the code never names whole
    assert not [p for p in check_batch(folder) if "is in the code" in p]
    folder, _ = _batch(tmp_path / "atelier", style="linocut")  # a style of the committed atelier catalog
    assert "“linocut” is another catalog's" in check_batch(folder)
    beside = tmp_path / "beside.jsonl"  # a catalog another helper is writing at the same time
    beside.write_text(json.dumps(_card(1, "zorbleck", "inkbloom", "fernhollow")) + "\n")
    folder, _ = _batch(tmp_path / "beside")
    assert "“zorbleck” is another catalog's" in check_batch(folder, [beside])
