"""Compare (issue 25): one prompt, seed and checkpoint at several settings, and the difference to full precision."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from personalq.service import AppError, Comparison, Progress
from test_app_service import TINY_STEPS, app_assets, service  # noqa: F401


def test_compare_renders_each_setting_with_one_seed_and_shows_the_differences(service):  # noqa: F811
    service.chat("tab-a", "my dog on the beach")
    events = list(service.compare_events("tab-a", ["W8A8", "W4A8", "W8A8"], seed=None, steps=TINY_STEPS))
    steps = [e.message for e in events if isinstance(e, Progress)]
    assert any(m.startswith("W4A8 (3 of 3)") for m in steps)
    comparison = events[-1]
    assert isinstance(comparison, Comparison)
    full, w8, w4 = comparison.variants
    assert [v.result.setting for v in comparison.variants] == ["FP32", "W8A8", "W4A8"]
    assert len({v.result.seed for v in comparison.variants}) == 1 and {v.prompt for v in comparison.variants} == {"<dog-v1> on the beach"}
    assert full.variant_bytes > w8.variant_bytes > w4.variant_bytes > 0  # what each variant's UNet holds
    for variant, diff in zip((w8, w4), comparison.differences, strict=True):
        expected = np.abs(np.asarray(variant.image, dtype=int) - np.asarray(full.image, dtype=int)).mean()
        assert diff.mean_abs == pytest.approx(expected) and diff.image.size == variant.image.size
        assert diff.label.startswith(f"|{variant.setting_label} − FP32|")
    assert service.session("tab-a").renders[-3:] == comparison.variants


def test_compare_needs_one_to_three_other_settings(service):  # noqa: F811
    service.chat("tab-a", "my dog on the beach")
    with pytest.raises(AppError, match="choose 1 to 3 settings"):
        list(service.compare_events("tab-a", ["FP32"]))


def test_cancel_stops_the_sessions_render_and_says_so(service):  # noqa: F811
    service.chat("tab-a", "my dog on the beach")
    events = service.session_generate_events("tab-a", setting="FP32", steps=50, seed=1)
    started = threading.Event()

    def cancel_when_sampling():
        started.wait(120)
        assert service.cancel("tab-a") == 1

    canceller = threading.Thread(target=cancel_when_sampling)
    canceller.start()
    with pytest.raises(AppError, match="cancelled"):
        for event in events:
            if isinstance(event, Progress) and event.step >= 1 and event.total == 50:
                started.set()
    canceller.join()
    assert service.session("tab-a").renders == [] and service.cancel("tab-a") == 0
