"""The training script: deterministic data, a full (tiny) run that exports loadable parts, and resume."""

import numpy as np
import pytest
import torch

from personalq.nano.train import render_dataset, train
from personalq.nano.world import VOCAB


@pytest.fixture(autouse=True)
def restore_threads():
    """`train(threads=1)` sets torch's process-wide thread count; give the next tests theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_dataset_is_reproducible():
    a_img, a_attrs, a_caps = render_dataset(12, seed=5, workers=1)
    b_img, b_attrs, b_caps = render_dataset(12, seed=5, workers=1)
    assert a_img.shape == (12, 64, 64, 3) and np.array_equal(a_img, b_img)
    assert a_attrs == b_attrs and a_caps == b_caps
    assert not np.array_equal(a_img, render_dataset(12, seed=6, workers=1)[0])


def test_smoke_run_exports_and_resumes(tmp_path):
    from personalq.nano.assemble import assemble
    from personalq.nano.judge import Judge

    out, work = tmp_path / "out", tmp_path / "work"
    options = dict(out=out, work=work, preset="smoke", minutes=5.0, seed=0, device="cpu", threads=1, workers=1,
                   text_encoder=None, init_from=None, checkpoint_minutes=10.0, eval_n=0, images=0)
    train(**options, resume=True)
    assert (work / "checkpoint.pt").exists()
    for part in ("unet", "vae", "judge"):
        assert (out / part / "config.json").exists()
    train(**options, resume=True)
    log = (out / "train_log.txt").read_text()
    assert "resuming from" in log and "checkpoint at UNet step 3" in log

    target = assemble(out, target=tmp_path / "pq-nano", judge_target=tmp_path / "judge")
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(str(target))
    image = pipe("a red bear", num_inference_steps=2, height=64, width=64).images[0]
    assert image.size == (64, 64)
    assert set(Judge.load(tmp_path / "judge").predict([image])[0]) == set(VOCAB)
