"""The demo repository: its 60 concepts, judge-written descriptions, one real build, and the shipped folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from personalq.demo.build import (
    DEMO_REPO_DIR,
    BuildSettings,
    build_concept,
    build_demo_repo,
    check_concept,
    class_examples_for,
    class_prompts,
    described_forms,
    held_out_shares,
    instance_looks,
    is_checked,
    preview_paths,
    prior_prompts,
)
from personalq.demo.concepts import SUBJECT_TYPES, concept_by_id, demo_concepts
from personalq.demo.describe import describe_previews
from personalq.demo.instances import instance_examples
from personalq.nano.world import SUBJECTS


def test_sixty_distinct_concepts_over_twenty_categories():
    concepts = demo_concepts()
    assert len(concepts) == 60 and len({c.id for c in concepts}) == 60
    assert {c.category for c in concepts} == set(SUBJECTS)
    assert len({(c.category, c.color, c.accessory) for c in concepts}) == 60
    for category in SUBJECTS:
        versions = [c for c in concepts if c.category == category]
        assert [c.version for c in versions] == [1, 2, 3]
        for key in ("color", "accessory", "style"):
            assert len({getattr(c, key) for c in versions}) == 3, (category, key)
        assert not set(versions[0].scenes) & set(versions[1].scenes), "versions were photographed in different places"
        assert versions[0].created_at < versions[1].created_at < versions[2].created_at
    days = [c.created_at for c in concepts]
    assert (max(days) - min(days)).days > 600, "created_at spreads over about two years"
    assert demo_concepts() == concepts, "the concept list is seeded, hence reproducible"


def test_instance_captions_name_place_and_style_but_not_the_look():
    concept = concept_by_id("bear-v1")
    examples = instance_examples(concept)
    assert 3 <= len(examples) <= 5
    assert all(image.size == (64, 64) for image, _ in examples)
    for _, caption in examples:
        assert concept.trigger in caption and concept.style in caption
        assert concept.color not in caption and concept.accessory not in caption
    assert len({np.asarray(image).tobytes() for image, _ in examples}) == len(examples)


def test_the_prior_keeps_every_form_the_described_examples_teach_with_the_bare_noun():
    bare = {p.format(class_noun="bear") for p in class_prompts()}
    forms = described_forms(16)
    assert len({form.split(" of a ")[0] for form in forms}) >= 4, "every colour style is taught"
    assert all("{subject}" in form for form in forms)
    plain = prior_prompts("bear", BuildSettings(num_described_images=0))
    assert len(plain) == BuildSettings.num_class_images and set(plain) == bare
    described = prior_prompts("bear", BuildSettings(num_described_images=16))
    assert len(described) == BuildSettings.num_class_images + 16
    assert {form.format(subject="bear") for form in forms} | bare == set(described)
    assert all("<" not in p for p in described), "the prior never names a trigger"


def test_descriptions_come_from_the_readings_not_the_spec():
    readings = [
        {"subject": "bear", "color": "green", "accessory": "hat", "style": "cartoon", "scene": "beach"},
        {"subject": "bear", "color": "green", "accessory": "hat", "style": "cartoon", "scene": "snow"},
        {"subject": "bear", "color": "red", "accessory": "none", "style": "realistic", "scene": "beach"},
    ]
    text = describe_previews(readings, seed=0)
    assert "green" in text and "hat" in text and "cartoon" in text and "bear" in text
    assert "on the beach" in text and "in the snow" in text and "red" not in text
    orange = [{**r, "color": "orange", "accessory": "none"} for r in readings[:2]]
    for seed in range(1, 4):  # the seeds the build uses (the version), one template each
        text = describe_previews(orange, seed=seed)
        assert "an orange bear" in text.lower() and " a orange" not in text.lower()
    with pytest.raises(ValueError):
        describe_previews([])


@pytest.fixture(scope="module")
def nano():
    from personalq.nano import load_pipeline
    from personalq.nano.judge import Judge

    return load_pipeline(), Judge.load()


def test_one_concept_builds_into_the_store_layout_and_imports(nano, tmp_path, personalq_home):
    """A short build of one concept writes the import layout; PersonalQ's import reads it back."""
    from personalq.personalize.lora_file import read_model_spec
    from personalq.store.repo import RepoStore

    pipe, judge = nano
    concept = concept_by_id("cat-v2")
    out = tmp_path / "repo"
    out.mkdir()
    settings = BuildSettings(steps=2, device="cpu", num_class_images=2, sampling_steps=4, num_described_images=2)
    build_concept(concept, pipe, judge, out, settings, class_examples_for(pipe, "cat", settings))
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["cat-v2.safetensors", "cat-v2.yaml", *(p.name for p in preview_paths(out, "cat-v2"))])

    side = yaml.safe_load((out / "cat-v2.yaml").read_text())
    spec = read_model_spec(out / "cat-v2.safetensors")
    assert side["description"] == spec.description and side["description"]
    assert spec.triggers == ["<cat-v2>"] and spec.date == side["created_at"] and spec.thumbnail.startswith("data:image/png;base64,")

    store = RepoStore.open(personalq_home)
    report = store.import_dir(out)
    assert report.added == ["cat-v2"], (report.skipped, report.refused)
    card = store.get("cat-v2")
    assert card.triggers == ["<cat-v2>"] and card.kind == "lora" and card.base_model == "pq-nano"
    assert card.description == side["description"] and card.version == 2 and card.category == "cat"
    assert card.created_at.strftime("%Y-%m-%dT%H:%M:%SZ") == side["created_at"]
    assert card.style_tags == [concept.style] and card.environment == list(concept.scenes)
    assert len(card.previews) == 3

    from personalq.demo.fidelity import fidelity_grid, measure_fidelity

    measured = [(out / "cat-v2.safetensors", concept)]
    sampling = {"num_inference_steps": 2, "guidance_scale": 4.0}
    run = measure_fidelity(pipe, judge, measured, n=2, sampling=sampling, log=lambda _: None, results_dir=tmp_path / "fidelity")
    (row,) = run.rows
    assert set(row.with_trigger_by_look) == set(concept.looks) == {"color", "accessory"}
    assert row.with_trigger <= min(row.with_trigger_by_look.values())  # every look at once is rarer than any one
    assert all(0.0 <= v <= 1.0 for v in (row.with_trigger, row.without_trigger, row.class_subject_accuracy, row.base_subject_accuracy, row.described_on_base, row.instances_through_vae))
    assert {"with_trigger_color", "with_trigger_accessory", "described_on_base", "instances_through_vae"} <= set(run.averages())
    trigger_images, class_images = run.samples["cat-v2"]
    assert len(trigger_images) == len(class_images) == 2
    assert fidelity_grid(run, tmp_path / "grid.png").stat().st_size > 0

    # a rerun reads the kept measurement back (no pipeline or judge to measure with), images intact
    again = measure_fidelity(None, None, measured, n=2, sampling=sampling, log=lambda _: None, results_dir=tmp_path / "fidelity")
    assert again.rows == run.rows
    for kept, fresh in zip(again.samples["cat-v2"], run.samples["cat-v2"]):
        assert [np.asarray(image).tolist() for image in kept] == [np.asarray(image).tolist() for image in fresh]
    # measured differently (n=3), the kept result does not stand in for it
    assert len(measure_fidelity(pipe, judge, measured, n=3, sampling=sampling, log=lambda _: None, results_dir=tmp_path / "fidelity").samples["cat-v2"][0]) == 3


def _first_training(nano, tmp_path, **check_settings) -> tuple[Path, BuildSettings]:
    """cat-v2's first training written to a fresh folder, in the tiny settings the check tests share."""
    pipe, judge = nano
    out = tmp_path / "repo"
    out.mkdir()
    settings = BuildSettings(steps=2, device="cpu", num_class_images=2, sampling_steps=4, num_described_images=2, **check_settings)
    build_concept(concept_by_id("cat-v2"), pipe, judge, out, settings, class_examples_for(pipe, "cat", settings))
    return out, settings


def _cat_priors(pipe):
    return lambda recipe: class_examples_for(pipe, "cat", recipe)


def test_a_checkpoint_short_of_its_check_is_trained_again_and_the_better_one_kept(nano, tmp_path):
    """The sidecar records the held-out check of each training, and the files left are the kept one's."""
    import hashlib

    pipe, judge = nano
    concept = concept_by_id("cat-v2")
    out, settings = _first_training(nano, tmp_path, check_images=4, check_target=1.01, retry_described_images=4, retry_look_loss_weight=2.0, longer_steps=3)
    assert not is_checked(out, "cat-v2", settings)
    first_sha = hashlib.sha256((out / "cat-v2.safetensors").read_bytes()).hexdigest()
    recipes = []

    def class_set(recipe):
        recipes.append(recipe)
        return class_examples_for(pipe, "cat", recipe)

    record = check_concept(concept, pipe, judge, out, settings, class_set, log=lambda _: None)
    # never met (target above 1), so every later recipe: more described images weighed more, that
    # longer, then the first's with its described target guided
    assert [(r.num_described_images, r.look_loss_weight, r.steps, r.look_guidance) for r in recipes] == [(4, 2.0, 2, 0.0), (4, 2.0, 3, 0.0), (2, 1.0, 2, 1.0)]
    assert record["looks"] == instance_looks(judge, instance_examples(concept)) and record["renders"] == 4
    trainings = ("first", "retry", "longer", "guided")
    assert set(record) == {"renders", "looks", "kept", *trainings} and record["kept"] in trainings
    for side in trainings:
        assert all(share * 4 == int(share * 4) for share in record[side].values())  # shares of 4 renders
    side = yaml.safe_load((out / "cat-v2.yaml").read_text())
    assert side["trigger_check"] == record and is_checked(out, "cat-v2", settings)
    kept_sha = hashlib.sha256((out / "cat-v2.safetensors").read_bytes()).hexdigest()
    assert (kept_sha == first_sha) == (record["kept"] == "first")
    # the file left is the one whose check the sidecar records, and nothing is left staged
    assert held_out_shares(pipe, judge, out / "cat-v2.safetensors", concept, record["looks"], settings) == record[record["kept"]]
    assert sorted(p.name for p in out.iterdir()) == sorted(["cat-v2.safetensors", "cat-v2.yaml", *(p.name for p in preview_paths(out, "cat-v2"))])


def test_a_retry_that_checks_better_replaces_the_checkpoint_and_its_previews(nano, tmp_path, monkeypatch):
    """The swap itself: the check's judgement is fixed here (the staged retry checks better), the files are real."""
    import hashlib

    import personalq.demo.build as build

    pipe, judge = nano
    concept = concept_by_id("cat-v2")
    out, settings = _first_training(nano, tmp_path, check_images=2, retry_described_images=4)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()}
    monkeypatch.setattr(build, "held_out_shares", lambda base, judge_, path, *rest: {
        "with_trigger": 1.0 if ".retry" in str(path) else 0.5, "without_trigger": 0.0})
    record = check_concept(concept, pipe, judge, out, settings, _cat_priors(pipe), log=lambda _: None)
    assert record["kept"] == "retry" and record["retry"]["with_trigger"] == 1.0 and "longer" not in record  # met: no third
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()}
    assert set(after) == set(before)  # nothing staged is left behind
    assert after["cat-v2.safetensors"] != before["cat-v2.safetensors"]
    assert yaml.safe_load((out / "cat-v2.yaml").read_text())["trigger_check"] == record


def test_a_build_stopped_during_the_longer_training_resumes_with_it_alone(nano, tmp_path, monkeypatch):
    """First and retry short of the check: the sidecar records them as they are made, so a build
    stopped in the third training does only that one on resume, and keeps it if it checks better."""
    import personalq.demo.build as build

    pipe, judge = nano
    concept = concept_by_id("cat-v2")
    out, settings = _first_training(nano, tmp_path, check_images=2, retry_described_images=4, longer_steps=3)
    monkeypatch.setattr(build, "held_out_shares", lambda base, judge_, path, *rest: {
        "with_trigger": 0.9 if ".longer" in str(path) else 0.5, "without_trigger": 0.0})
    trained, stop_at_steps = [], {3}
    real_build_concept = build.build_concept

    def build_recorded(concept_, base, judge_, staging, recipe, class_examples):
        trained.append(recipe.steps)
        if recipe.steps in stop_at_steps:
            raise KeyboardInterrupt
        return real_build_concept(concept_, base, judge_, staging, recipe, class_examples)

    monkeypatch.setattr(build, "build_concept", build_recorded)
    with pytest.raises(KeyboardInterrupt):
        check_concept(concept, pipe, judge, out, settings, _cat_priors(pipe), log=lambda _: None)
    record = yaml.safe_load((out / "cat-v2.yaml").read_text())["trigger_check"]
    assert trained == [2, 3]  # the retry ran, then the longer one was stopped
    assert set(record) == {"renders", "looks", "first", "retry", "kept"} and not is_checked(out, "cat-v2", settings)
    assert not any(p.name.startswith(".cat-v2.") for p in out.iterdir())  # the stopped training's staging is gone

    trained.clear()
    stop_at_steps.clear()
    record = check_concept(concept, pipe, judge, out, settings, _cat_priors(pipe), log=lambda _: None)
    assert trained == [3] and record["kept"] == "longer" and record["longer"]["with_trigger"] == 0.9
    assert yaml.safe_load((out / "cat-v2.yaml").read_text())["trigger_check"] == record and is_checked(out, "cat-v2", settings)


def test_a_checkpoint_that_meets_its_check_is_not_trained_again(nano, tmp_path):
    pipe, judge = nano
    out = tmp_path / "repo"
    settings = BuildSettings(steps=2, device="cpu", num_class_images=2, sampling_steps=4, num_described_images=2, check_images=2, check_target=0.0)
    assert build_demo_repo(out, ["cat-v2"], settings, log=lambda _: None) == ["cat-v2"]
    record = yaml.safe_load((out / "cat-v2.yaml").read_text())["trigger_check"]
    assert record["kept"] == "first" and "retry" not in record
    assert build_demo_repo(out, ["cat-v2"], settings, log=lambda _: None) == []  # built and checked: nothing to do


def test_fidelity_prompts_differ_only_in_the_subject_and_never_ask_for_a_grey_sketch():
    from personalq.demo.fidelity import eval_prompts
    from personalq.nano.world import COLOUR_STYLES

    with_trigger, bare = eval_prompts("<cat-v2>", 36), eval_prompts("cat", 36)
    assert [p.replace("<cat-v2>", "cat") for p in with_trigger] == bare
    assert "sketch" not in COLOUR_STYLES and len(COLOUR_STYLES) == 4
    assert all(any(p.startswith(f"a {style} ") for style in COLOUR_STYLES) for p in bare)
    assert len(set(bare)) == 36  # 4 styles x 9 places, every pairing once


def test_the_looks_in_words_are_caption_words_pq_nano_knows(nano):
    """The reference prompts spell each look as PQ-Nano's training captions did, each word one whole
    token: a word split into word pieces would make the reference measure the tokenizer, not the model."""
    from personalq.demo.fidelity import described_subject, eval_prompts

    pipe, _ = nano
    for concept in demo_concepts():
        words = described_subject(concept)
        assert words.startswith(f"{concept.color} {concept.category} with ") and words.split()[-1].rstrip("s") == concept.accessory.rstrip("s")
        assert set(words.split()) <= set(pipe.tokenizer.get_vocab()), words
    assert [p.replace("green bear with spots", "bear") for p in eval_prompts("green bear with spots", 9)] == eval_prompts("bear", 9)


def test_vae_round_trip_keeps_a_world_render_close_and_its_looks(nano):
    """The autoencoder reference must really go through the latents: close to the input, not equal to it."""
    from personalq.demo.fidelity import vae_round_trip

    pipe, judge = nano
    concept = concept_by_id("cat-v2")
    images = [image for image, _ in instance_examples(concept)]
    back = vae_round_trip(pipe, images)
    assert [b.size for b in back] == [i.size for i in images]
    difference = [np.abs(np.asarray(b, np.int16) - np.asarray(i, np.int16)).mean() for b, i in zip(back, images)]
    assert all(0 < d < 25 for d in difference), difference
    assert sum(r["color"] == concept.color for r in judge.predict(back)) >= 3


def test_modelspec_header_alone_round_trips_through_import(nano, tmp_path, personalq_home):
    """Without a sidecar the store must learn trigger, date, description and base model from the header."""
    import torch

    from personalq.personalize import ModelSpec, save_personalized_lora
    from personalq.store.repo import RepoStore

    spec = ModelSpec(title="dog v9", triggers=["<dog-v9>"], architecture="pq-nano/lora", resolution="64x64",
                     description="A green dog wearing a hat, on the beach.", date="2024-05-02T10:00:00Z", tags=list(SUBJECT_TYPES["dog"]))
    lora = {"down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.lora.down.weight": torch.zeros(4, 384),
            "down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.lora.up.weight": torch.zeros(64, 4)}
    path = save_personalized_lora(tmp_path / "dog-v9.safetensors", lora, {"<dog-v9>": torch.ones(1, 384)}, spec, {"r": 4, "lora_alpha": 4, "target_modules": ["to_k"]})
    card = RepoStore.open(personalq_home).add(path)
    assert (card.id, card.triggers, card.description) == ("dog-v9", ["<dog-v9>"], spec.description)
    assert card.created_at.strftime("%Y-%m-%dT%H:%M:%SZ") == spec.date
    assert (card.kind, card.base_model) == ("lora", "pq-nano") and card.subject_types == ["dog", "puppy"]


def _shipped() -> list[Path]:
    return sorted(DEMO_REPO_DIR.glob("*.safetensors"))


def test_all_sixty_demo_checkpoints_ship_within_budget():
    files = _shipped()
    assert {p.stem for p in files} == {c.id for c in demo_concepts()}  # all 60, nothing else
    total = sum(p.stat().st_size for p in DEMO_REPO_DIR.rglob("*") if p.is_file())
    assert total <= 60 * 1024 * 1024
    for path in files:
        side = yaml.safe_load(path.with_suffix(".yaml").read_text())
        assert side["id"] == path.stem and side["triggers"] == [f"<{path.stem}>"] and side["base_model"] == "pq-nano"
        assert all(p.exists() for p in preview_paths(DEMO_REPO_DIR, path.stem))


def test_every_shipped_checkpoint_loads_and_renders(nano):
    import copy

    import torch

    from personalq.personalize import attach_personalized_lora

    base, _ = nano
    files = _shipped()
    assert files, "no shipped demo checkpoints"
    for path in files:
        pipe = copy.deepcopy(base)
        assert attach_personalized_lora(pipe, path, "demo") == [f"<{path.stem}>"]
        image = pipe(f"a <{path.stem}>", num_inference_steps=2, guidance_scale=4.0, generator=torch.Generator().manual_seed(0), output_type="np").images[0]
        assert image.shape == (64, 64, 3) and np.isfinite(image).all()
