"""The shipped PQ-Nano: loads offline as a plain SD pipeline, renders what it is asked, takes triggers."""

import numpy as np
import pytest
import torch

from personalq.nano import DEFAULT_GUIDANCE, NANO_PATH, load_pipeline
from personalq.nano.judge import Judge


@pytest.fixture(scope="module")
def pipe(one_torch_thread):
    return load_pipeline()


@pytest.fixture(scope="module")
def judge():
    return Judge.load()


def test_loads_with_plain_from_pretrained_as_fp32():
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(str(NANO_PATH))
    assert {pipe.unet.dtype, pipe.vae.dtype, pipe.text_encoder.dtype} == {torch.float32}
    assert pipe.unet.config.sample_size == 16 and pipe.vae.config.scaling_factor != 0.18215


def test_renders_the_asked_subject(pipe, judge):
    asked = [("bear", "brown"), ("car", "red"), ("house", "blue")]
    prompts = [f"a cartoon {colour} {subject} in a studio" for subject, colour in asked]
    images = pipe(prompts, num_inference_steps=20, guidance_scale=DEFAULT_GUIDANCE, height=64, width=64,
                  generator=[torch.Generator().manual_seed(0) for _ in prompts]).images
    for image, (subject, colour), seen in zip(images, asked, judge.predict(images)):
        assert image.size == (64, 64)
        assert np.asarray(image).std() > 10  # a picture, not a flat field
        assert (seen["subject"], seen["color"]) == (subject, colour), seen


def test_same_seed_same_image(pipe):
    run = lambda: np.asarray(pipe("a dog on the beach", num_inference_steps=4, height=64, width=64,  # noqa: E731
                                   generator=torch.Generator().manual_seed(3)).images[0])
    assert np.array_equal(run(), run())


def test_trigger_token_survives_save_and_reload(tmp_path):
    from transformers import BertModel, BertTokenizerFast

    from personalq.nano.model import load_text_encoder

    encoder, tokenizer = load_text_encoder(NANO_PATH)
    assert len(tokenizer.tokenize("<bear-v4>")) > 1  # splits like a real checkpoint's trigger
    tokenizer.add_tokens(["<bear-v4>"])
    encoder.resize_token_embeddings(len(tokenizer))
    with torch.no_grad():
        encoder.get_input_embeddings().weight[-1] = 0.5
    encoder.save_pretrained(tmp_path / "text_encoder")
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    tok2 = BertTokenizerFast.from_pretrained(tmp_path / "tokenizer")
    enc2 = BertModel.from_pretrained(tmp_path / "text_encoder")
    assert tok2.tokenize("a <bear-v4> bear") == ["a", "<bear-v4>", "bear"]
    trigger_id = tok2.convert_tokens_to_ids("<bear-v4>")
    assert torch.allclose(enc2.get_input_embeddings().weight[trigger_id], torch.full((384,), 0.5))
