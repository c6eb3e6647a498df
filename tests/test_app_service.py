"""The app's library facade on a small repository built here: a tiny SD 1.5-layout base and real LoRA files.

The builders below are shared with the browser and `gradio_client` tests (imported from this module),
so all three exercise the real store, Check-in and serving code on the same few checkpoints.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

LORA_TARGETS = ["to_q", "to_k", "to_v", "to_out.0"]
TINY_STEPS = 2

# Two bears (so "my bear" needs a question), one dog; the cat is what tests upload.
REPO = {
    "bear-v1": dict(trigger="<bear-v1>", noun="bear", style="cartoon", created="2025-03-05", version=1,
                    description="A plush cartoon teddy bear, tan with a cream snout, on a forest path.", color="#b45309"),
    "bear-v2": dict(trigger="<bear-v2>", noun="bear", style="realistic", created="2025-04-11", version=2,
                    description="A realistic brown bear standing in a pine forest.", color="#78350f"),
    "dog-v1": dict(trigger="<dog-v1>", noun="dog", style="watercolor", created="2025-02-01", version=1,
                   description="A small white dog painted in watercolor on a beach.", color="#e5e7eb"),
}
UPLOAD = dict(trigger="<cat-v1>", noun="cat", style="sketch", created="2025-05-20", version=1,
              description="A black cat sitting on a windowsill, drawn as a pencil sketch.", color="#111827")
UPLOAD_API = dict(trigger="<horse-v1>", noun="horse", style="realistic", created="2025-06-02", version=1,
                  description="A chestnut horse running across a meadow.", color="#9a3412")


def save_tiny_base(directory: Path) -> Path:
    """A random-weight SD 1.5-layout pipeline saved as a diffusers folder: the app's base model in tests."""
    from personalq.random_pipelines import tiny_sd15_pipeline

    tiny_sd15_pipeline(seed=0).save_pretrained(str(directory))
    return directory


def write_lora(path: Path, checkpoint_id: str, spec: dict, seed: int, thumbnail: str = "") -> Path:
    """A personalized LoRA for the tiny base: random non-zero UNet LoRA + a trigger embedding, ModelSpec header."""
    from diffusers.utils import convert_state_dict_to_diffusers
    from peft import LoraConfig, get_peft_model_state_dict

    from personalq.personalize.lora_file import ModelSpec, save_personalized_lora
    from personalq.random_pipelines import tiny_sd15_pipeline

    unet = tiny_sd15_pipeline(seed=0).unet
    unet.add_adapter(LoraConfig(r=4, lora_alpha=4, target_modules=LORA_TARGETS))
    generator = torch.Generator().manual_seed(seed)
    lora = {k: torch.randn(v.shape, generator=generator) * 0.05
            for k, v in convert_state_dict_to_diffusers(get_peft_model_state_dict(unet)).items()}
    spec_header = ModelSpec(title=checkpoint_id, triggers=[spec["trigger"]], architecture="stable-diffusion-v1/lora",
                            resolution="32x32", description=spec["description"], date=spec["created"] + "T10:00:00Z",
                            tags=[spec["style"]], base_model="sd15", class_noun=spec["noun"], thumbnail=thumbnail)
    embedding = {spec["trigger"]: torch.randn((1, 32), generator=generator)}
    return save_personalized_lora(path, lora, embedding, spec_header,
                                  lora_config={"r": 4, "lora_alpha": 4, "target_modules": LORA_TARGETS})


def write_checkpoint(directory: Path, checkpoint_id: str, spec: dict, seed: int) -> Path:
    """name.safetensors + name.yaml sidecar + name.png preview: the layout a user keeps."""
    directory.mkdir(parents=True, exist_ok=True)
    path = write_lora(directory / f"{checkpoint_id}.safetensors", checkpoint_id, spec, seed)
    sidecar = {"id": checkpoint_id, "triggers": [spec["trigger"]], "subject_types": [spec["noun"]],
               "style_tags": [spec["style"]], "description": spec["description"], "created_at": spec["created"],
               "version": spec["version"], "category": spec["noun"], "base_model": "sd15", "kind": "lora"}
    (directory / f"{checkpoint_id}.yaml").write_text(yaml.safe_dump(sidecar))
    Image.new("RGB", (64, 64), spec["color"]).save(directory / f"{checkpoint_id}.png")
    return path


def build_demo_dir(directory: Path) -> Path:
    for seed, (checkpoint_id, spec) in enumerate(REPO.items()):
        write_checkpoint(directory, checkpoint_id, spec, seed=seed + 1)
    return directory


@pytest.fixture(scope="session")
def app_assets(tmp_path_factory):
    """Built once per test session: the tiny base folder and a demo-repository folder of LoRA files."""
    root = tmp_path_factory.mktemp("app-assets")
    base = save_tiny_base(root / "tiny-base")
    demo = build_demo_dir(root / "demo_repo")
    upload_dir = root / "upload"
    upload_dir.mkdir()
    cat = write_lora(upload_dir / "cat-v1.safetensors", "cat-v1", UPLOAD, seed=9)
    Image.new("RGB", (64, 64), UPLOAD["color"]).save(upload_dir / "cat-v1.png")
    horse = write_lora(upload_dir / "horse-v1.safetensors", "horse-v1", UPLOAD_API, seed=10)
    broken = upload_dir / "broken.safetensors"
    broken.write_bytes(cat.read_bytes()[: cat.stat().st_size // 2])  # a truncated download
    from personalq.store import RepoStore
    from personalq.store.weights import served_bases

    home = root / "home-with-demo"  # imported once; tests start from copies (the store keeps paths home-relative)
    with RepoStore.open(home, bases=served_bases(base)) as store:  # the LoRAs are validated against the tiny base
        assert sorted(store.import_dir(demo).added) == sorted(REPO)
    return {"base": base, "demo": demo, "home": home, "cat": cat, "cat_preview": upload_dir / "cat-v1.png",
            "horse": horse, "broken": broken}


@pytest.fixture
def service(app_assets, personalq_home, monkeypatch):
    from personalq.service import PersonalQService

    monkeypatch.setenv("PERSONALQ_BASE_MODEL", str(app_assets["base"]))
    monkeypatch.setenv("PERSONALQ_STEPS", str(TINY_STEPS))
    shutil.copytree(app_assets["home"], personalq_home, dirs_exist_ok=True)
    svc = PersonalQService(home=personalq_home, demo_repo=app_assets["demo"])
    yield svc
    svc.close()


# ---------------------------------------------------------------------------------------------- tests


def test_first_start_imports_the_demo_repository_once(app_assets, tmp_path):
    from personalq.service import AppSettings, PersonalQService

    settings = AppSettings(base_model=str(app_assets["base"]))
    first = PersonalQService(home=tmp_path / "fresh", settings=settings, demo_repo=app_assets["demo"])
    try:
        assert sorted(c.id for c in first.store.cards()) == sorted(REPO)
        assert sorted(first.first_start_import.added) == sorted(REPO)
        first.remove("dog-v1")
    finally:
        first.close()
    again = PersonalQService(home=tmp_path / "fresh", settings=settings, demo_repo=app_assets["demo"])
    try:
        # A store that is not empty is the user's: a restart must not re-add what they removed.
        assert again.first_start_import is None
        assert sorted(c.id for c in again.store.cards()) == ["bear-v1", "bear-v2"]
    finally:
        again.close()


def test_clarify_then_option_selects_and_rewrites(service):
    reply = service.chat("tab-a", "my bear at night")
    assert reply.action == "clarify" and len(reply.options) == 2
    assert all(o.preview is not None and o.preview.exists() for o in reply.options)
    assert "bear-v" not in reply.message  # the question never shows raw ids
    chosen = next(i for i, o in enumerate(reply.options) if o.checkpoint_ids == ["bear-v2"])
    final = service.answer("tab-a", chosen)
    assert final.action == "select" and final.card.id == "bear-v2"
    assert final.prompt == "<bear-v2> at night"  # "my" is the user's word, not the model's
    assert service.session("tab-a").prompt == final.prompt and not service.session("tab-a").awaiting_answer


def test_typed_answer_continues_the_conversation_and_sessions_are_separate(service):
    assert service.chat("tab-a", "my bear at night").action == "clarify"
    assert service.chat("tab-b", "my dog on the beach").card.id == "dog-v1"
    # tab-b's selection did not answer tab-a's question; tab-a's typed words do.
    assert service.session("tab-a").awaiting_answer
    final = service.chat("tab-a", "the realistic one")
    assert final.action == "select" and final.card.id == "bear-v2"
    assert service.session("tab-b").selected.id == "dog-v1"


def test_no_match_names_the_failed_constraint_and_offers_nearest(service):
    reply = service.chat("tab-a", "my bear at the beach")
    assert reply.action == "no_match"
    # the bear is what is wanted: the place is blamed and the bears are offered, not the dog on the beach
    assert "beach" in reply.message and {c.id for c in reply.nearest} == {"bear-v1", "bear-v2"}
    assert reply.card is None and service.session("tab-a").selected is None


def test_generate_streams_progress_and_labels_the_image(service):
    service.chat("tab-a", "my dog on the beach")
    events = list(service.session_generate_events("tab-a", setting="W8A8", steps=TINY_STEPS, seed=1))
    assert events[0].message.startswith("Loading the base model")
    sampling = [e.step for e in events[:-1] if e.total == TINY_STEPS and e.step > 0]
    assert sampling == list(range(1, TINY_STEPS + 1))
    drawn = events[-1]
    assert drawn.image.size == (32, 32)
    assert drawn.label.startswith(f"W8A8 + TAQ · seed 1 · {TINY_STEPS} steps · dog-v1 · ") and drawn.label.endswith(" MiB")
    assert drawn.result.checkpoint_id == "dog-v1" and 0 < drawn.variant_bytes < drawn.result.resident_bytes
    # The user edits the prompt: it is rendered as typed, and becomes what a bit-width change re-renders.
    edited = service.generate("my <dog-v1> in the snow", "dog-v1", setting="FP32", steps=TINY_STEPS, seed=1)
    again = list(service.session_generate_events("tab-a", "my <dog-v1> in the snow", setting="FP32", steps=TINY_STEPS,
                                                 seed=1))[-1]
    assert service.session("tab-a").prompt == "my <dog-v1> in the snow"
    assert again.label.startswith("FP32 · ") and np.array_equal(np.asarray(again.image), np.asarray(edited.image))
    assert not np.array_equal(np.asarray(again.image), np.asarray(drawn.image))


def test_generate_without_a_selection_or_with_a_bad_setting_is_refused(service):
    from personalq.service import AppError

    with pytest.raises(AppError, match="no checkpoint is selected"):
        list(service.session_generate_events("tab-a"))
    with pytest.raises(AppError, match="unknown bit-width"):
        list(service.generate_events("a <dog-v1>", "dog-v1", setting="W3A3"))


def test_upload_prefills_from_header_and_is_selectable_next_message(service, app_assets):
    form = service.upload_form(app_assets["cat"])
    assert form["triggers"] == "<cat-v1>" and form["created_at"].startswith("2025-05-20")
    assert "pencil sketch" in form["description"]
    form.update(id="cat-v1", subject_types="cat", category="cat", style_tags="sketch")
    card = service.upload(app_assets["cat"], form, [app_assets["cat_preview"]])
    assert card.id == "cat-v1" and len(card.previews) == 1
    reply = service.chat("tab-a", "my cat")
    assert reply.action == "select" and reply.card.id == "cat-v1" and reply.prompt == "<cat-v1>"


def test_bad_uploads_are_refused_in_one_line_and_change_nothing(service, app_assets, tmp_path):
    from personalq.service import AppError

    before = (service.store.revision, sorted(c.id for c in service.store.cards()))
    with pytest.raises(AppError) as refused:
        service.upload(app_assets["broken"], {"id": "broken"})
    assert "\n" not in str(refused.value)
    pickle = tmp_path / "model.ckpt"
    pickle.write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(AppError, match="only .safetensors"):
        service.upload(pickle, {})
    service.save_settings(upload_limit_mb=1)
    big = tmp_path / "big.safetensors"
    big.write_bytes(b"\0" * (2**20 + 1))
    with pytest.raises(AppError, match="upload limit is 1 MiB"):
        service.upload(big, {})
    assert (service.store.revision, sorted(c.id for c in service.store.cards())) == before


def test_settings_persist_in_the_data_directory_and_bad_values_are_refused(service, personalq_home):
    from personalq.service import AppSettings, SettingsError

    service.save_settings(llm_model="gpt-4o-mini", memory_budget_mb="2048")
    saved = json.loads((personalq_home / "settings.json").read_text())
    assert saved["llm_model"] == "gpt-4o-mini" and saved["memory_budget_mb"] == 2048
    assert "key" not in json.dumps(saved).lower()  # keys stay in the environment
    assert AppSettings.load(personalq_home).memory_budget_bytes == 2048 * 2**20
    with pytest.raises(SettingsError, match="memory_budget_mb"):
        service.save_settings(memory_budget_mb="lots")
    assert AppSettings.load(personalq_home).memory_budget_mb == 2048


def test_repository_filters_and_timeline(service):
    assert [c.id for c in service.repository(category="bear")] == ["bear-v2", "bear-v1"]
    assert [c.id for c in service.repository(style="watercolor")] == ["dog-v1"]
    assert [c.id for c in service.repository(created_from="April 2025")] == ["bear-v2"]
    assert [c.id for c in service.repository(text="pine")] == ["bear-v2"]
    card, versions = service.detail("bear-v2")
    assert [v.id for v in versions] == ["bear-v1", "bear-v2"]
    from personalq.service import AppError

    with pytest.raises(AppError, match="cannot read the 'from' date"):
        service.repository(created_from="the day after never")
