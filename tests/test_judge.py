"""The shipped judge reads world renders correctly, and alignment scoring counts only named attributes."""

import numpy as np
import pytest

from personalq.eval.alignment import alignment_scores, held_out_cases
from personalq.nano.judge import IGNORE, Judge, labels_for
from personalq.nano.world import VOCAB, WorldAttributes, render, sample_attributes


@pytest.fixture(scope="module")
def judge():
    return Judge.load()


def test_reads_fresh_renders(judge):
    rng = np.random.default_rng(123)
    attrs = [sample_attributes(rng) for _ in range(300)]
    images = [render(a, seed=900_000 + i) for i, a in enumerate(attrs)]
    accuracy = judge.accuracy(images, attrs)
    assert set(accuracy) == set(VOCAB)
    for name, value in accuracy.items():
        assert value >= 0.93, (name, value)


def test_predict_returns_vocabulary_values(judge):
    image = render(WorldAttributes("bear", "brown", size="large", accessory="scarf", style="cartoon", scene="snow"), 5)
    seen = judge.predict([image])[0]
    assert set(seen) == set(VOCAB) and all(seen[k] in VOCAB[k] for k in VOCAB)
    assert (seen["subject"], seen["color"], seen["scene"]) == ("bear", "brown", "snow")


def test_sketch_colour_is_not_labelled():
    labels = labels_for([WorldAttributes("car", "red", style="sketch"), WorldAttributes("car", "red")], VOCAB)
    assert labels["color"].tolist() == [IGNORE, VOCAB["color"].index("red")]


def test_alignment_of_real_renders_is_near_perfect_and_of_wrong_images_low(judge):
    cases = held_out_cases(60, seed=7)
    real = [render(c.attrs, seed=i) for i, c in enumerate(cases)]
    good = alignment_scores(judge, real, cases)
    assert good["alignment_subject"] >= 0.95 and good["alignment_mean_over_attributes"] >= 0.93
    shuffled = alignment_scores(judge, real[1:] + real[:1], cases)  # each image paired with another caption
    assert shuffled["alignment_subject"] < 0.3
    assert good["n"] == 60
