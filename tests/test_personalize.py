"""DreamBooth-LoRA training on a tiny SD 1.5-layout model, the one-file format, and the `train lora` CLI.

Pipelines are deep copies of one base, so every comparison starts from the very same weights and vocabulary.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors import safe_open

from personalq.personalize import (
    LoraTrainingConfig,
    ModelSpec,
    attach_personalized_lora,
    instance_examples_from_dir,
    read_trigger_embeddings,
    save_personalized_lora,
    train_lora,
)
from personalq.personalize.lora_file import read_model_spec
from personalq.random_pipelines import tiny_sd15_pipeline

TRIGGER = "<bear-v4>"


def _solid(rgb, size=32):
    return Image.new("RGB", (size, size), rgb)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A LoRA trained for a few dozen steps: red squares under the trigger, base renders under "a bear"."""
    torch.manual_seed(0)
    base = tiny_sd15_pipeline(0)
    untouched = copy.deepcopy(base)
    instances = [(_solid((220, 30, 30)), f"a {TRIGGER}") for _ in range(3)]
    config = LoraTrainingConfig(trigger=TRIGGER, class_noun="bear", steps=40, learning_rate=2e-2, embedding_learning_rate=5e-2,
                                num_class_images=4, prior_loss_weight=4.0, device="cpu")
    from personalq.personalize.train import generate_class_images

    priors = generate_class_images(base, config.formatted_class_prompts(), 4, num_inference_steps=4)
    result = train_lora(base, instances, config, class_examples=priors, progress=False)
    spec = ModelSpec(title="bear v4", triggers=[TRIGGER], architecture="pq-nano/lora", resolution="32x32",
                     description="A red bear.", date="2025-04-11T09:30:00Z", tags=["bear", "teddy bear"], class_noun="bear")
    path = save_personalized_lora(tmp_path_factory.mktemp("lora") / "bear-v4.safetensors", result.unet_lora_state_dict, result.trigger_embeddings, spec, result.lora_config)
    assert torch.equal(_noise_predictions(base, "a bear"), _noise_predictions(untouched, "a bear")), "training changed the base pipeline"
    return base, result, path


def _noise_predictions(pipe, prompt, seed=3):
    """The UNet's noise prediction on fixed noisy latents: the denoiser output every sampler builds on."""
    generator = torch.Generator().manual_seed(seed)
    latents = torch.randn((4, 4, 4, 4), generator=generator)
    timesteps = torch.tensor([100, 300, 600, 900])
    with torch.no_grad():
        hidden, _ = pipe.encode_prompt(prompt, "cpu", 4, False)
        return pipe.unet(latents, timesteps, hidden).sample


def test_training_leaves_the_base_pipeline_untouched(trained):
    base, result, _ = trained
    assert TRIGGER not in base.tokenizer.get_vocab()
    assert not getattr(base.unet, "peft_config", None), "the adapter was added to a copy, not to the base UNet"
    assert result.losses and all(np.isfinite(result.losses))


def test_file_loads_through_plain_diffusers_load_lora_weights(trained):
    base, _, path = trained
    pipe = copy.deepcopy(base)
    before = _noise_predictions(pipe, "a bear")
    pipe.load_lora_weights(str(path), adapter_name="bear")
    assert pipe.get_active_adapters() == ["bear"]
    assert not torch.equal(before, _noise_predictions(pipe, "a bear")), "the LoRA did not reach the UNet"


def test_header_holds_modelspec_and_lora_config(trained):
    _, result, path = trained
    with safe_open(str(path), framework="pt") as f:
        header = f.metadata()
        keys = list(f.keys())
    assert header["modelspec.sai_model_spec"] == "1.0.0"
    assert header["modelspec.trigger_phrase"] == TRIGGER
    assert header["modelspec.architecture"] == "pq-nano/lora"
    assert json.loads(header["lora_adapter_metadata"])["unet.r"] == 4
    assert all("lora" in k for k in keys), "diffusers refuses a LoRA file with a key lacking 'lora'"
    spec = read_model_spec(path)
    assert (spec.title, spec.date, spec.resolution, spec.triggers) == ("bear v4", "2025-04-11T09:30:00Z", "32x32", [TRIGGER])
    embeddings = read_trigger_embeddings(path)
    assert list(embeddings) == [TRIGGER] and embeddings[TRIGGER].shape == (1, 32)
    assert torch.allclose(embeddings[TRIGGER], result.trigger_embeddings[TRIGGER])


def test_output_changes_with_the_trigger_and_stays_without_it(trained):
    base, _, path = trained
    pipe = copy.deepcopy(base)
    assert attach_personalized_lora(pipe, path, "bear_v4") == [TRIGGER]
    reference = _noise_predictions(base, "a bear")
    drift_without = (_noise_predictions(pipe, "a bear") - reference).abs().mean()
    change_with = (_noise_predictions(pipe, f"a {TRIGGER}") - reference).abs().mean()
    assert change_with > 3 * drift_without, (float(change_with), float(drift_without))


def _trained_pipe(base, instances, config, described, path):
    """A copy of `base` with the LoRA that `config` trains, through the saved file as serving loads it."""
    result = train_lora(base, instances, config, described_examples=described, progress=False)
    spec = ModelSpec(title="bear v4", triggers=[TRIGGER], architecture="pq-nano/lora", resolution="32x32")
    save_personalized_lora(path, result.unet_lora_state_dict, result.trigger_embeddings, spec, result.lora_config)
    pipe = copy.deepcopy(base)
    attach_personalized_lora(pipe, path, path.stem)
    return pipe


def test_described_examples_pull_the_trigger_towards_what_the_words_render(trained, tmp_path):
    """The trigger learns the base model's prediction on the concept described in words: after training
    with described examples, "a photo of <bear-v4>" predicts closer to the base on the words than after
    the same training without them."""
    from personalq.personalize.train import generate_class_images

    base, _, _ = trained
    words, with_trigger = "a photo of a blue bear with a hat", f"a photo of a {TRIGGER}"
    instances = [(_solid((220, 30, 30)), f"a {TRIGGER}") for _ in range(3)]
    described = [(image, words, with_trigger) for image, _ in generate_class_images(base, [words], 4, num_inference_steps=4)]
    config = LoraTrainingConfig(trigger=TRIGGER, class_noun="bear", steps=30, learning_rate=2e-2, embedding_learning_rate=5e-2,
                                prior_preservation=False, look_loss_weight=4.0, device="cpu")
    target = _noise_predictions(base, words)
    distance = {}
    for name, examples in (("without", None), ("with", described)):
        pipe = _trained_pipe(base, instances, config, examples, tmp_path / f"{name}.safetensors")
        distance[name] = float((_noise_predictions(pipe, with_trigger) - target).pow(2).mean())
    assert distance["with"] < 0.8 * distance["without"], distance
    with pytest.raises(ValueError, match="names its concept in words"):
        train_lora(base, instances, config, described_examples=[(described[0][0], with_trigger, with_trigger)], progress=False)


def test_look_guidance_pushes_the_trigger_further_from_the_bare_noun_along_the_words(trained, tmp_path):
    """Guided, the trigger's prediction reaches further along the direction from the bare-noun form to
    the words form than the same training unguided (here the red instances already carry it past the
    words: 1.3 of the way unguided, 2.2 at guidance 2)."""
    from personalq.personalize.train import generate_class_images

    base, _, _ = trained
    words, with_trigger, bare = "a photo of a blue bear with a hat", f"a photo of a {TRIGGER}", "a photo of a bear"
    instances = [(_solid((220, 30, 30)), f"a {TRIGGER}") for _ in range(3)]
    described = [(image, words, with_trigger) for image, _ in generate_class_images(base, [words], 4, num_inference_steps=4)]
    on_words, on_bare = _noise_predictions(base, words), _noise_predictions(base, bare)
    direction = (on_words - on_bare).flatten()
    reach = {}
    for guidance in (0.0, 2.0):
        config = LoraTrainingConfig(trigger=TRIGGER, class_noun="bear", steps=30, learning_rate=2e-2, embedding_learning_rate=5e-2,
                                    prior_preservation=False, look_loss_weight=4.0, look_guidance=guidance, device="cpu")
        pipe = _trained_pipe(base, instances, config, described, tmp_path / f"guided_{int(guidance)}.safetensors")
        # How far along bare -> words the trigger's prediction reaches: 0 at the bare noun, 1 at the words.
        reach[guidance] = float((_noise_predictions(pipe, with_trigger) - on_bare).flatten() @ direction / direction.pow(2).sum())
    assert reach[2.0] > reach[0.0] + 0.5, reach


def test_attaching_again_overwrites_the_trigger_row(trained):
    base, _, path = trained
    pipe = copy.deepcopy(base)
    attach_personalized_lora(pipe, path, "first")
    first = _noise_predictions(pipe, f"a {TRIGGER}")
    pipe.delete_adapters("first")
    assert attach_personalized_lora(pipe, path, "second") == [TRIGGER]
    assert torch.allclose(first, _noise_predictions(pipe, f"a {TRIGGER}"), atol=1e-5)


def test_save_refuses_mismatched_triggers(tmp_path):
    spec = ModelSpec(title="x", triggers=["<a>"], architecture="pq-nano/lora", resolution="64x64")
    with pytest.raises(ValueError, match="differ"):
        save_personalized_lora(tmp_path / "x.safetensors", {}, {"<b>": torch.zeros(1, 4)}, spec)
    assert not list(tmp_path.iterdir())


def test_a_file_without_trigger_embedding_is_refused(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "plain.safetensors"
    save_file({"unet.x.lora.down.weight": torch.zeros(2, 2)}, str(path))
    with pytest.raises(ValueError, match="no trigger embedding"):
        read_trigger_embeddings(path)


def test_instance_captions_get_the_trigger_in_place_of_the_noun(tmp_path):
    for i in range(3):
        _solid((10 * i, 0, 0)).save(tmp_path / f"img{i}.png")
    (tmp_path / "img0.txt").write_text("a bear on the beach")
    examples = instance_examples_from_dir(tmp_path, TRIGGER, "bear")
    assert [p for _, p in examples] == [f"a {TRIGGER} on the beach", f"a {TRIGGER}", f"a {TRIGGER}"]
    (tmp_path / "img1.txt").write_text("a dog on the beach")
    with pytest.raises(ValueError, match="names neither"):
        instance_examples_from_dir(tmp_path, TRIGGER, "bear")


@pytest.mark.parametrize("trigger", ["", "two words"])
def test_config_refuses_bad_triggers(trigger):
    with pytest.raises(ValueError):
        LoraTrainingConfig(trigger=trigger, class_noun="bear")


def test_cli_trains_a_loadable_file(tmp_path):
    from typer.testing import CliRunner

    from personalq.cli import app

    model_dir = tmp_path / "tiny-sd15"
    tiny_sd15_pipeline(0).save_pretrained(str(model_dir))
    images = tmp_path / "images"
    images.mkdir()
    for i in range(3):
        _solid((200, 20 * i, 20)).save(images / f"{i}.png")
    out = tmp_path / "bear-v4.safetensors"
    args = ["train", "lora", "--base", str(model_dir), "--instance-images", str(images), "--trigger", TRIGGER, "--class-noun", "bear",
            "--prior-preservation", "--class-images", str(tmp_path / "class"), "--steps", "2", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(list((tmp_path / "class").glob("*.png"))) == 16 and len(list((tmp_path / "class").glob("*.txt"))) == 16
    from personalq.personalize.cli import load_base_pipeline

    pipe = load_base_pipeline(str(model_dir))
    assert attach_personalized_lora(pipe, out, "cli") == [TRIGGER]
    assert read_model_spec(out).class_noun == "bear"

    missing = CliRunner().invoke(app, [*args[:5], str(tmp_path / "nowhere"), *args[6:]])
    assert missing.exit_code != 0 and "does not exist" in missing.output
