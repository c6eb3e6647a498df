"""The bugs issue 25 found in the browser, each pinned at the service the UI and API call.

Each test failed on the main the issue started from: an empty seed box raised TypeError, a date filter
mixing an ISO day and words raised TypeError, saving settings overwrote fields nobody touched, a typed
id or trigger picked another checkpoint with a garbled prompt, a question read "Do you want  or ...",
the rewritten prompt kept "my", and a new request typed while a question was open was eaten as its
answer. The quantized cache of `personalq generate --home H` is checked in test_app_generate_home.py.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PIL import Image

from test_app_service import TINY_STEPS, app_assets, service, write_checkpoint  # noqa: F401


def test_a_blank_seed_draws_a_random_one_and_says_which(service):  # noqa: F811
    service.chat("tab-a", "my dog on the beach")
    first = service.generate("<dog-v1> on the beach", "dog-v1", steps=1, seed=None)
    second = service.generate("<dog-v1> on the beach", "dog-v1", steps=1, seed="")
    assert first.result.seed != second.result.seed  # two draws, not a fixed fallback
    assert f"seed {first.result.seed} " in first.label
    again = service.generate("<dog-v1> on the beach", "dog-v1", steps=1, seed=float(first.result.seed))
    assert np.array_equal(np.asarray(again.image), np.asarray(first.image))  # the shown seed reproduces it
    from personalq.service import AppError

    with pytest.raises(AppError, match="seed must be a whole number"):
        service.generate("<dog-v1>", "dog-v1", steps=1, seed="1.5")


def test_date_filters_mix_iso_days_and_words(service):  # noqa: F811
    # "yesterday" reads as a moment (a time of day), "2025-01-01" as a day: comparing the two was a TypeError.
    assert [c.id for c in service.repository(created_from="2025-01-01", created_to="yesterday")] == ["bear-v2", "bear-v1", "dog-v1"]
    assert [c.id for c in service.repository(created_from="2025-03-01", created_to="April 2025")] == ["bear-v2", "bear-v1"]
    assert [c.id for c in service.repository(created_from="February 2025", created_to="2025-03-05")] == ["bear-v1", "dog-v1"]
    from personalq.service import AppError

    with pytest.raises(AppError, match="after the 'to' date"):
        service.repository(created_from="May 2025", created_to="2025-04-30")


def test_saving_settings_changes_only_the_given_fields(service, personalq_home):  # noqa: F811
    from personalq.service import AppSettings

    service.save_settings(llm_model="gpt-4o-mini")
    # Another tab (or process) saves the budget while this one's page still shows the old values.
    other = AppSettings.load(personalq_home)
    (personalq_home / "settings.json").write_text(json.dumps({**other.__dict__, "memory_budget_mb": 900}))
    saved = service.save_settings(steps=7)
    assert (saved.llm_model, saved.memory_budget_mb, saved.steps) == ("gpt-4o-mini", 900, 7)
    assert AppSettings.load(personalq_home) == saved == service.settings


@pytest.mark.parametrize("typed", ["cat-v1", "<cat-v1>", "draw cat-v1 on a sofa", "CAT-V1 please"])
def test_a_typed_id_or_trigger_selects_that_checkpoint(service, app_assets, typed):  # noqa: F811
    form = service.upload_form(app_assets["cat"])
    form.update(id="cat-v1", subject_types="cat", category="cat", style_tags="sketch")
    service.upload(app_assets["cat"], form)
    reply = service.chat("tab-a", typed)
    assert reply.action == "select" and reply.card.id == "cat-v1"
    assert reply.prompt.count("<cat-v1>") == 1 and "-v1>-v1" not in reply.prompt and "cat-v1 " not in reply.prompt


def test_typing_dog_v1_is_not_rewritten_to_a_garbled_trigger(service):  # noqa: F811
    reply = service.chat("tab-a", "dog-v1 in the snow")
    assert (reply.card.id, reply.prompt) == ("dog-v1", "<dog-v1> in the snow")


def test_a_subject_the_repository_lacks_is_a_no_match_naming_it_not_a_question(service):  # noqa: F811
    # The issue saw "my spaceship" ask to choose among cars. That did not reproduce on the main the issue
    # started from (this test passes there too, also with two cars added); it guards the behaviour.
    reply = service.chat("tab-a", "my spaceship")
    assert reply.action == "no_match" and not reply.options and "spaceship" in reply.message


def test_the_rewritten_prompt_drops_my(service):  # noqa: F811
    assert service.chat("tab-a", "my dog on the beach").prompt == "<dog-v1> on the beach"
    assert service.chat("tab-b", "a picture of my dog").prompt == "a picture of <dog-v1>"
    assert service.chat("tab-c", "my watercolor dog").prompt == "watercolor <dog-v1>"


def test_a_question_over_look_alike_checkpoints_names_each_and_has_no_empty_slot(app_assets, tmp_path, monkeypatch):  # noqa: F811
    """Two bears alike in every field, created the same day: Check-in's question had one empty label."""
    from personalq.service import PersonalQService

    spec = dict(trigger="<twin-a>", noun="bear", style="cartoon", created="2025-03-05", version=1,
                description="A plush cartoon teddy bear.", color="#b45309")
    demo = tmp_path / "twins"
    write_checkpoint(demo, "twin-a", spec, seed=1)
    write_checkpoint(demo, "twin-b", dict(spec, trigger="<twin-b>"), seed=2)
    monkeypatch.setenv("PERSONALQ_BASE_MODEL", str(app_assets["base"]))
    svc = PersonalQService(home=tmp_path / "home", demo_repo=demo)
    try:
        reply = svc.chat("tab-a", "my cartoon bear")
        assert reply.action == "clarify" and "  " not in reply.message and " or " in reply.message
        assert sorted(i for o in reply.options for i in o.checkpoint_ids) == ["twin-a", "twin-b"]
        assert all(len(o.checkpoint_ids) == 1 for o in reply.options)
        assert svc.answer("tab-a", 1).card.id == reply.options[1].checkpoint_ids[0]
    finally:
        svc.close()


def test_a_new_request_during_a_question_starts_over_and_an_answer_still_answers(service):  # noqa: F811
    assert service.chat("tab-a", "my bear").action == "clarify"
    dog = service.chat("tab-a", "my dog on the beach")
    assert (dog.action, dog.card.id) == ("select", "dog-v1") and not service.session("tab-a").awaiting_answer
    assert service.chat("tab-a", "my bear").action == "clarify"
    assert service.chat("tab-a", "the realistic one").card.id == "bear-v2"


def test_example_prompts_come_from_the_repository_and_each_is_answered(service):  # noqa: F811
    examples = service.example_prompts()
    assert examples and all(e.startswith("my ") for e in examples)
    assert {"my watercolor dog", "my realistic bear"} <= set(examples)
    for example in examples:
        assert service.select("tab-x", example).action in ("select", "clarify")


def test_each_render_is_kept_by_its_session_as_a_png_with_parameters(service):  # noqa: F811
    service.chat("tab-a", "my dog on the beach")
    drawn = [e for e in service.session_generate_events("tab-a", setting="FP32", steps=TINY_STEPS, seed=5)][-1]
    other = [e for e in service.session_generate_events("tab-a", setting="W8A8", steps=TINY_STEPS, seed=5)][-1]
    assert service.session("tab-a").renders == [drawn, other] and service.session("tab-b").renders == []
    assert drawn.path.name == f"dog-v1_FP32_seed5_{TINY_STEPS}steps.png"
    assert other.path.name == f"dog-v1_W8A8-TAQ_seed5_{TINY_STEPS}steps.png"
    with Image.open(drawn.path) as png:
        assert png.format == "PNG" and np.array_equal(np.asarray(png.convert("RGB")), np.asarray(drawn.image))
        prompt, fields = png.text["parameters"].split("\n")
    assert prompt == "<dog-v1> on the beach"
    assert f"Steps: {TINY_STEPS}, " in fields and "Seed: 5, " in fields and "Checkpoint: dog-v1, " in fields
    assert "Size: 32x32" in fields and "Setting: FP32" in fields
    assert service.home not in drawn.path.parents  # Gradio may serve it; the data directory it never serves


def test_the_upload_form_shows_the_headers_thumbnail_and_refusals_name_their_field(service, tmp_path):  # noqa: F811
    import base64
    import io

    from personalq.service import AppError
    from test_app_service import UPLOAD, write_lora

    png = io.BytesIO()
    Image.new("RGB", (48, 40), "#2563eb").save(png, format="PNG")
    uri = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
    path = write_lora(tmp_path / "owl-v1.safetensors", "owl-v1", dict(UPLOAD, trigger="<owl-v1>"), seed=3, thumbnail=uri)
    with Image.open(io.BytesIO(service.header_thumbnail(path))) as shown:
        assert shown.size == (48, 40) and shown.getpixel((0, 0)) == (37, 99, 235)
    assert service.header_thumbnail(write_lora(tmp_path / "plain.safetensors", "plain", UPLOAD, seed=4)) is None
    with pytest.raises(AppError) as refused:
        service.upload(path, {"id": "owl-v1", "category": "owl", "created_at": "someday"})
    assert service.refusal_field(refused.value) == "created_at"
    assert service.refusal_field(AppError("owl.safetensors: corrupt or truncated")) is None
