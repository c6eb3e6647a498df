"""FD-EffNet: exact Frechet distance, and on real features it separates like from unlike images."""

import numpy as np
from scipy import linalg

from personalq.eval.fd_effnet import effnet_features, frechet_distance
from personalq.nano.world import WorldAttributes, render, sample_attributes


def test_frechet_distance_matches_the_sqrtm_formula():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(200, 20)), rng.normal(size=(200, 20)) * 1.3 + 0.4
    ca, cb = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    expected = ((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(ca + cb - 2 * linalg.sqrtm(ca @ cb).real)
    assert np.isclose(frechet_distance(a, b), expected)
    assert abs(frechet_distance(a, a)) < 1e-6


def test_effnet_features_tell_world_images_from_noise():
    rng = np.random.default_rng(1)
    world = [render(sample_attributes(rng), i) for i in range(24)]
    other = [render(sample_attributes(rng), 100 + i) for i in range(24)]
    from PIL import Image

    noise = [Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)) for _ in range(24)]
    fw, fo, fn = effnet_features(world), effnet_features(other), effnet_features(noise)
    assert fw.shape == (24, 1280)
    same, far = frechet_distance(fw, fo), frechet_distance(fw, fn)
    assert far > 3 * same, (same, far)
    bears = effnet_features([render(WorldAttributes("bear", "brown"), i) for i in range(2)])
    assert np.allclose(bears[0], effnet_features([render(WorldAttributes("bear", "brown"), 0)])[0], atol=1e-4)
