"""`PersonalQ` and `open_repository`: one way to open a data directory (CLI and library alike), select,
answer and generate; a reranker backend and a base-model loader plugged in through their protocols.

Runs on the app tests' small repository (two bears, one dog: real LoRA files for a tiny SD 1.5-layout base).
"""

from __future__ import annotations

import json

import pytest
from test_app_service import REPO, TINY_STEPS, app_assets  # noqa: F401  (app_assets is a fixture)
from typer.testing import CliRunner

from personalq.checkin.rerank import RerankOutcome
from personalq.library import PersonalQ, open_repository
from personalq.protocols import BaseModelLoader, RerankerBackend


@pytest.fixture
def settings(app_assets):  # noqa: F811
    from personalq.service.settings import AppSettings

    return AppSettings(base_model=str(app_assets["base"]), steps=TINY_STEPS)


def test_an_empty_repository_is_filled_from_the_demo_folder_once(app_assets, tmp_path):  # noqa: F811
    home = tmp_path / "fresh"
    first = open_repository(home, str(app_assets["base"]), demo_repo=app_assets["demo"])
    assert sorted(first.first_start_import.added) == sorted(REPO)
    first.repo.close()
    again = open_repository(home, str(app_assets["base"]), demo_repo=app_assets["demo"])
    assert again.first_start_import is None and sorted(c.id for c in again.repo.cards()) == sorted(REPO)
    again.repo.close()


def test_the_demo_folder_comes_from_the_environment_and_off_means_empty(app_assets, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PERSONALQ_DEMO_REPO", "off")
    with open_repository(tmp_path / "a", str(app_assets["base"])).repo as repo:
        assert repo.cards() == []
    monkeypatch.setenv("PERSONALQ_DEMO_REPO", str(app_assets["demo"]))
    with open_repository(tmp_path / "b", str(app_assets["base"])).repo as repo:
        assert sorted(c.id for c in repo.cards()) == sorted(REPO)


def test_the_cli_opens_a_fresh_home_as_the_app_does(app_assets, tmp_path, monkeypatch):  # noqa: F811
    from personalq.cli import app

    monkeypatch.setenv("PERSONALQ_DEMO_REPO", str(app_assets["demo"]))
    monkeypatch.setenv("PERSONALQ_BASE_MODEL", str(app_assets["base"]))  # the demo LoRAs are checked against it
    result = CliRunner().invoke(app, ["repo", "list", "--json", "--home", str(tmp_path / "cli-home")])
    assert result.exit_code == 0, result.output
    assert sorted(entry["id"] for entry in json.loads(result.output)) == sorted(REPO)
    fresh = CliRunner().invoke(app, ["select", "my bear", "--json", "--home", str(tmp_path / "select-home")])
    assert fresh.exit_code == 0, fresh.output
    assert json.loads(fresh.output)["plausible_ids"] == ["bear-v2", "bear-v1"], "select sees the demo a fresh app shows"


def test_select_asks_then_answer_by_index_or_words_selects(app_assets, settings, tmp_path):  # noqa: F811
    with PersonalQ(tmp_path / "home", settings, demo_repo=app_assets["demo"]) as pq:
        asked = pq.select("my bear")
        assert asked.action == "clarify" and len(asked.options) == 2
        chosen = pq.answer(0)
        assert chosen.action == "select" and chosen.checkpoint_id in asked.options[0].checkpoint_ids
        assert chosen.card.triggers[0] in chosen.rewritten_prompt
        pq.select("my bear")
        assert pq.answer("the realistic one").checkpoint_id == "bear-v2"
        with pytest.raises(ValueError, match="no open question"):
            pq.answer(0)  # the question was answered
        pq.select("my bear")
        with pytest.raises(ValueError, match="option 5 does not exist"):
            pq.answer(5)
        with pytest.raises(ValueError, match="empty"):
            pq.select("   ")
        assert pq.select("my giraffe").action == "no_match"


class FirstByDate:
    """A reranker backend in a few lines: always the oldest of the checkpoints that fit."""

    name = "oldest-first"

    def choose(self, request, cards):
        return RerankOutcome(min(cards, key=lambda card: card.created_at).id, "chosen")


def test_a_reranker_backend_decides_among_the_checkpoints_that_fit(app_assets, settings, tmp_path):  # noqa: F811
    backend: RerankerBackend = FirstByDate()
    with PersonalQ(tmp_path / "home", settings, demo_repo=app_assets["demo"], reranker=backend) as pq:
        result = pq.select("my bear")
        assert (result.action, result.checkpoint_id, result.decided_by) == ("select", "bear-v1", "llm")
        assert "oldest-first" in result.reason
        assert pq.select("my dog").checkpoint_id == "dog-v1"  # one fits: no backend needed


class TinyLoader:
    """A base-model loader in a few lines: serves the name 'tiny-test' from a saved diffusers folder."""

    family = "sd15"

    def __init__(self, folder):
        self.folder, self.loaded = folder, 0

    def handles(self, spec: str) -> bool:
        return spec == "tiny-test"

    def load(self, spec, dtype):
        from diffusers import StableDiffusionPipeline

        self.loaded += 1
        return StableDiffusionPipeline.from_pretrained(str(self.folder), dtype=dtype)


@pytest.mark.slow
def test_generate_renders_a_checkpoint_on_a_registered_base_and_keeps_variants_in_home(app_assets, tmp_path, monkeypatch):  # noqa: F811
    from personalq.serving import ServingError, base
    from personalq.service.settings import AppSettings

    loader: BaseModelLoader = TinyLoader(app_assets["base"])
    monkeypatch.setattr(base, "_LOADERS", [])
    base.register_base_loader(loader)
    home = tmp_path / "home"
    with open_repository(home, str(app_assets["base"]), demo_repo=app_assets["demo"]).repo:
        pass  # imported (and validated) against the tiny base's shapes
    with PersonalQ(home, AppSettings(base_model="tiny-test")) as pq:
        result = pq.generate("a photo of <dog-v1> on a beach", "dog-v1", setting="W8A8", steps=1, seed=3)
        assert result.image.size == (32, 32) and result.checkpoint_id == "dog-v1" and result.seed == 3
        assert result.protected_triggers == ["<dog-v1>"]
        assert loader.loaded == 1 and pq.manager.family == "sd15"
        assert any((home / "quantized").rglob("*")), "the quantized variant is kept in HOME"
        with pytest.raises(ServingError, match="checkpoint nope: not in the store"):
            pq.generate("a photo", "nope", steps=1)
        assert not pq.use_settings(AppSettings(base_model="tiny-test", steps=5))  # serving unaffected
        assert pq.use_settings(AppSettings(base_model=str(app_assets["base"])))
        assert pq.generate("a photo", steps=1).image.size == (32, 32) and loader.loaded == 1  # the folder, not the loader
        assert pq.manager.config.base_model == str(app_assets["base"]) and "sd15" in pq.repo.bases


def test_a_base_registered_for_validation_keeps_the_shipped_ones_known(app_assets, monkeypatch):  # noqa: F811
    from personalq.store import weights

    monkeypatch.setattr(weights, "_BASES", {})  # as in a fresh process, before any upload was checked
    weights.register_base(weights.FolderShapes("tiny-test", app_assets["base"]))
    assert weights.base_shapes("tiny-test").text_widths() == {"text_encoder": 32}
    assert weights.base_shapes("sd15") is not None and weights.base_shapes("pq-nano") is not None
