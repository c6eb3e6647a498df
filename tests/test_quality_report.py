"""The per-image quality CSVs and the tables/verdicts computed from them, on hand-made data with known answers."""

import csv

import numpy as np
import pytest

from personalq.eval.paired_quality import CSV_COLUMNS, Design, Item, design_items, pixel_distance, read_csv, served_calibration_prompts, write_csv
from personalq.eval.quality_bench import Concept
from personalq.eval.quality_report import best_baseline, cells_by_setting, load, report, verdict


def _rows(setting, method, successes, distances):
    return [{"setting": setting, "method": method, "checkpoint": f"c{i // 4}", "prompt": f"a <c{i // 4}> p{i % 2}",
             "seed": (i // 2) % 2, "judge_success": int(s), "dist_to_fp": d} for i, (s, d) in enumerate(zip(successes, distances))]


def _write(folder, n=40, taq_wins=10, plain_wins=0, fp_rate=0.5):
    """n images; plain PTQ succeeds on the first 10; TAQ on those (minus `plain_wins`) plus `taq_wins` more."""
    plain = np.zeros(n, bool)
    plain[:10] = True
    taq = plain.copy()
    taq[10 : 10 + taq_wins] = True
    taq[:plain_wins] = False
    fp = np.arange(n) < int(fp_rate * n)
    write_csv(_rows("FP32", "full precision", fp, [0.0] * n), folder / "fp32.csv")
    write_csv(_rows("W4A4", "plain PTQ", plain, np.linspace(10, 20, n)) + _rows("W4A4", "TAQ", taq, np.linspace(9, 19, n))
              + _rows("W4A4", "start token", plain, np.linspace(10, 20, n) + 0.5), folder / "w4a4.csv")
    return folder


def test_csv_round_trip_keeps_the_required_columns(tmp_path):
    rows = _rows("W8A8", "TAQ", [True, False], [1.25, 3.5])
    path = write_csv(rows, tmp_path / "w8a8.csv")
    with path.open() as f:
        assert next(csv.reader(f)) == list(CSV_COLUMNS)
    back = read_csv(path)
    assert [r["judge_success"] for r in back] == [True, False] and [r["dist_to_fp"] for r in back] == [1.25, 3.5]
    (tmp_path / "bad.csv").write_text("setting,method\nW8A8,TAQ\n")
    with pytest.raises(ValueError, match="lacks columns"):
        read_csv(tmp_path / "bad.csv")


def test_cells_are_paired_on_the_same_images_or_refused(tmp_path):
    rows = _rows("W4A4", "plain PTQ", [True, False, True], [1, 2, 3]) + _rows("W4A4", "TAQ", [True, True, False], [1, 1, 1])
    cells = cells_by_setting(rows[::-1])  # order in the file does not matter: images are matched by key
    # sorted keys: (c0, p0, seed 0), (c0, p0, seed 1), (c0, p1, seed 0) = rows 0, 2, 1 of each method
    assert cells["W4A4"]["plain PTQ"].success.tolist() == [True, True, False]
    assert cells["W4A4"]["TAQ"].success.tolist() == [True, False, True]
    assert cells["W4A4"]["plain PTQ"].distance.tolist() == [1.0, 3.0, 2.0]
    with pytest.raises(ValueError, match="not the same images"):
        cells_by_setting(rows[:-1])
    with pytest.raises(ValueError, match="twice"):
        cells_by_setting(rows + rows[:1])


def test_ten_discordant_wins_in_forty_meet_the_target_with_the_exact_mcnemar_p(tmp_path):
    fp, cells = load(_write(tmp_path, taq_wins=10, plain_wins=0))
    text = verdict("W4A4", cells["W4A4"], fp)
    # +25 points; exact two-sided binomial p of 10/10 discordant pairs = 2 / 2^10
    assert "+25.0 points" in text and "p = 0.002" in text and "MET" in text and "NOT" not in text


def test_a_large_gain_that_is_not_significant_is_not_met(tmp_path):
    fp, cells = load(_write(tmp_path, taq_wins=8, plain_wins=3))  # +12.5 points, 8 vs 3 discordant: p = 0.23
    assert "NOT met" in verdict("W4A4", cells["W4A4"], fp)


def test_best_baseline_ignores_taq_rows_and_the_report_has_one_table_per_setting(tmp_path):
    fp, cells = load(_write(tmp_path))
    assert best_baseline(cells["W4A4"]) == "plain PTQ"  # tied success with start token, smaller distance
    text = report(tmp_path)
    assert text.count("| method | n |") == 1 and "| TAQ | 40 | 50.0 [" in text and "| full precision | 40 |" in text


def test_w8a8_verdict_compares_taq_with_full_precision(tmp_path):
    n = 20
    fp_success = np.arange(n) < 10
    write_csv(_rows("FP32", "full precision", fp_success, [0.0] * n), tmp_path / "fp32.csv")
    write_csv(_rows("W8A8", "plain PTQ", fp_success, [1.0] * n) + _rows("W8A8", "TAQ", fp_success, [0.5] * n), tmp_path / "w8a8.csv")
    fp, cells = load(tmp_path)
    text = verdict("W8A8", cells["W8A8"], fp)
    assert "TAQ vs full precision +0.0 points [95% CI +0.0, +0.0]" in text and "target (within 3 points of FP) MET" in text


def test_w8a8_within_three_points_needs_the_whole_interval_inside(tmp_path):
    n = 40
    fp_success = np.arange(n) < 30
    taq_success = fp_success.copy()
    taq_success[[0, 5, 10, 15]] = False  # 4 of 40 lost: a gap of -10 points
    taq_success[[30, 35, 38]] = True  # 3 of 40 gained: net -2.5 points, but an interval wider than +-3
    write_csv(_rows("FP32", "full precision", fp_success, [0.0] * n), tmp_path / "fp32.csv")
    write_csv(_rows("W8A8", "plain PTQ", fp_success, [1.0] * n) + _rows("W8A8", "TAQ", taq_success, [0.5] * n), tmp_path / "w8a8.csv")
    fp, cells = load(tmp_path)
    text = verdict("W8A8", cells["W8A8"], fp)
    assert "-2.5 points" in text and "NOT established" in text


def test_design_items_pair_every_checkpoint_prompt_and_seed():
    concepts = [Concept(f"c{i}", f"<c{i}>", "dog", "unused", (("color", "red"),)) for i in range(3)]
    items = design_items(concepts, Design(checkpoints=2, prompts=3, seeds=2))
    assert len(items) == len(set(items)) == 2 * 3 * 2
    assert all(i.prompt.count(f"<{i.checkpoint}>") == 1 for i in items) and {i.checkpoint for i in items} == {"c0", "c1"}
    assert isinstance(items[0], Item)
    calibration = served_calibration_prompts(concepts, 5)
    assert [p.count(f"<c{k % 3}>") for k, p in enumerate(calibration)] == [1] * 5
    assert not set(calibration) & {i.prompt for i in items}


def test_pixel_distance_is_the_mean_absolute_difference_per_image():
    a = np.zeros((2, 4, 4, 3), np.uint8)
    b = a.copy()
    b[0] = 255
    b[1, :2] = 10
    assert pixel_distance(a, b).tolist() == [255.0, 5.0]
    with pytest.raises(ValueError):
        pixel_distance(a, b[:1])
