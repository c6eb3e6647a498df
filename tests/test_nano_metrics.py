"""FD-EffNet: exact Frechet distance, and on real features it separates like from unlike images."""

import numpy as np
import pytest
import torch
from scipy import linalg

from personalq.eval.fd_effnet import effnet_features, frechet_distance
from personalq.nano.world import WorldAttributes, render, sample_attributes


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_frechet_distance_matches_the_sqrtm_formula():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(200, 20)), rng.normal(size=(200, 20)) * 1.3 + 0.4
    ca, cb = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    expected = ((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(ca + cb - 2 * linalg.sqrtm(ca @ cb).real)
    assert np.isclose(frechet_distance(a, b), expected)
    assert abs(frechet_distance(a, a)) < 1e-6


def test_effnet_features_tell_world_images_from_noise():
    rng = np.random.default_rng(1)
    world = [render(sample_attributes(rng), i) for i in range(16)]
    other = [render(sample_attributes(rng), 100 + i) for i in range(16)]
    from PIL import Image

    noise = [Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)) for _ in range(16)]
    fw, fo, fn = effnet_features(world), effnet_features(other), effnet_features(noise)
    assert fw.shape == (16, 1280)
    # At 16 samples in 1280 dimensions the covariance terms are estimation noise (FD itself needs
    # hundreds of images, as in the benchmark); the mean term already separates world from noise.
    gap = lambda a, b: ((a.mean(0) - b.mean(0)) ** 2).sum()  # noqa: E731
    assert gap(fw, fn) > 3 * gap(fw, fo), (gap(fw, fo), gap(fw, fn))
    bears = effnet_features([render(WorldAttributes("bear", "brown"), i) for i in range(2)])
    assert np.allclose(bears[0], effnet_features([render(WorldAttributes("bear", "brown"), 0)])[0], atol=1e-4)


def test_clip_score_matches_clip_models_own_logits(tmp_path):
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    from personalq.eval.clip_score import clip_score
    from personalq.random_pipelines import build_clip_tokenizer

    tokenizer = build_clip_tokenizer(tmp_path / "tok")
    torch.manual_seed(0)
    config = CLIPConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=77, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=32, patch_size=8),
        projection_dim=16,
    )
    model = CLIPModel(config).eval()
    processor = CLIPProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size=32), tokenizer=tokenizer)
    model.save_pretrained(tmp_path / "clip")
    processor.save_pretrained(tmp_path / "clip")

    rng = np.random.default_rng(0)
    attrs = [sample_attributes(rng) for _ in range(3)]
    images = [render(a, i) for i, a in enumerate(attrs)]
    texts = [f"a {a.color} {a.subject}" for a in attrs]
    score = clip_score(images, texts, tmp_path / "clip")
    inputs = processor(text=texts, images=images, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model(**inputs)
    cos = out.logits_per_image.diagonal() / model.logit_scale.exp()
    assert np.isclose(score, float((100 * cos.clamp(min=0)).mean()), atol=1e-3)
