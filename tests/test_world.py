"""The world renderer: deterministic, valid attributes, and each attribute visibly changes the image."""

import numpy as np
import pytest

from personalq.nano.world import (
    IMAGE_SIZE,
    SUBJECTS,
    VOCAB,
    WorldAttributes,
    caption,
    describe,
    render,
    sample_attributes,
)


def test_render_is_deterministic_64px_rgb():
    attrs = WorldAttributes("bear", "brown", accessory="scarf", style="cartoon", scene="snow")
    a, b = render(attrs, seed=3), render(attrs, seed=3)
    assert a.size == (IMAGE_SIZE, IMAGE_SIZE) and a.mode == "RGB"
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(render(attrs, seed=4)))


@pytest.mark.parametrize("name", [n for n in VOCAB if n != "size"])
def test_each_attribute_changes_the_pixels(name):
    base = WorldAttributes("dog", "red", size="large", style="realistic", scene="studio")
    first = np.asarray(render(base, seed=1)).astype(int)
    for value in VOCAB[name]:
        if value == getattr(base, name):
            continue
        other = np.asarray(render(WorldAttributes(**{**base.as_dict(), name: value}), seed=1)).astype(int)
        assert np.abs(first - other).mean() > 1.0, (name, value)


def test_colour_shows_where_the_figure_is():
    red = np.asarray(render(WorldAttributes("house", "red", size="large", scene="studio"), 0)).astype(int)
    blue = np.asarray(render(WorldAttributes("house", "blue", size="large", scene="studio"), 0)).astype(int)
    centre = (slice(28, 60), slice(16, 48))
    assert red[centre][..., 0].mean() > blue[centre][..., 0].mean() + 30
    assert blue[centre][..., 2].mean() > red[centre][..., 2].mean() + 30


def test_sketch_is_grey():
    img = np.asarray(render(WorldAttributes("car", "red", style="sketch", scene="beach"), 0)).astype(int)
    assert np.abs(img[..., 0] - img[..., 2]).max() == 0
    assert "color" not in WorldAttributes("car", "red", style="sketch").visible()


def test_sample_attributes_respects_fixed_and_rejects_unknown():
    rng = np.random.default_rng(0)
    seen = {sample_attributes(rng).subject for _ in range(300)}
    assert seen == set(SUBJECTS)
    fixed = sample_attributes(rng, subject="bear", color="brown", accessory="scarf")
    assert (fixed.subject, fixed.color, fixed.accessory) == ("bear", "brown", "scarf")
    with pytest.raises(ValueError, match="unknown attribute"):
        sample_attributes(rng, hue="red")
    with pytest.raises(ValueError, match="unknown subject 'unicorn'"):
        WorldAttributes("unicorn", "red")


def test_captions_name_what_they_say():
    rng = np.random.default_rng(0)
    for _ in range(200):
        attrs = sample_attributes(rng)
        cap = describe(attrs, rng)
        text = cap.text
        if "color" in cap.named:
            assert attrs.color in text.split()
        else:
            assert not set(VOCAB["color"]) & set(text.split())
        if "style" in cap.named and attrs.style in ("cartoon", "watercolor"):
            assert attrs.style in text
        assert "  " not in text and not text.endswith(" ")
    assert caption(WorldAttributes("bear", "brown"), np.random.default_rng(1))
