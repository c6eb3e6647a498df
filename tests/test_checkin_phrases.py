"""Phrase classes (exclusions, version phrasings) on a catalog whose vocabulary (kites, harps,
gouache, meadows) appears nowhere in personalq/."""

from __future__ import annotations

import pytest

from catalog_checkin import checkin_over

NOW = "2025-06-30T12:00:00Z"


def entry(id, subjects, style, env, created, description, version):
    return {"id": id, "triggers": [f"<{id}>"], "subject_types": subjects, "style_tags": [style],
            "environment": [env], "created_at": created, "last_used_at": None, "version": version,
            "description": description, "category": subjects[0], "base_model": "sd15", "kind": "lora"}


CATALOG = [
    entry("kite-a", ["kite"], "cartoon", "meadow", "2025-03-01T12:00:00Z", "A red box kite over a meadow.", 1),
    entry("kite-b", ["kite"], "gouache", "meadow", "2025-04-01T12:00:00Z", "A blue diamond kite in gouache.", 2),
    entry("harp-a", ["harp"], "gouache", "cathedral", "2025-05-01T12:00:00Z", "A gilded concert harp.", 1),
]


@pytest.fixture(scope="module")
def checkin(tmp_path_factory):
    return checkin_over(CATALOG, tmp_path_factory, "exclusion")


@pytest.mark.parametrize("text, expected", [
    ("my kite but not the cartoon one", "kite-b"),
    ("the kite, not cartoon", "kite-b"),
    ("any kite except the gouache one", "kite-a"),
    ("my cartoon kite", "kite-a"),                      # no negation: the term is required as before
    ("the gouache one, not the harp", "kite-b"),       # an excluded subject rules its checkpoints out
])
def test_a_negated_term_rules_its_matches_out(checkin, text, expected):
    result = checkin.ask(text, now=NOW)
    assert result.action == "select", (text, result.action, result.reason)
    assert result.checkpoint_id == expected, (text, result.reason)


@pytest.mark.parametrize("text", ["kite revision 2", "my kite, number 2", "the kite rev 2", "kite version no. 2",
                                  "the second iteration of my kite", "kite iteration two"])
def test_every_common_version_phrasing_names_the_version(checkin, text):
    result = checkin.ask(text, now=NOW)
    assert (result.action, result.checkpoint_id) == ("select", "kite-b"), (text, result.reason)
