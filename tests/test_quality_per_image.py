"""`personalq bench quality --per-image` end to end on the tiny SD 1.5-layout model, its two LoRAs and an
untrained (seeded) judge: the CSVs hold one row per image and method, distances are measured against the
full-precision images, and a second call resumes without rendering anything."""

import csv

import numpy as np
import pytest
from typer.testing import CliRunner

from personalq.cli import app
from tests.test_quality_bench import tiny_bench_inputs

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def per_image(tmp_path_factory):
    root = tmp_path_factory.mktemp("per_image")
    judge_dir = tiny_bench_inputs(root)
    args = ["bench", "quality", "--per-image", "--checkpoints", "2", "--trigger-prompts", "2", "--seeds", "2", "--steps", "2",
            "--settings", "W4A4", "--methods", "plain PTQ,TAQ", "--model", str(root / "model"),
            "--concepts", str(root / "concepts.json"), "--judge", str(judge_dir), "--out", str(root / "run"), "--csv-dir", str(root / "csv")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return {"root": root, "args": args, "output": result.output}


def _csv(path):
    with path.open() as f:
        return list(csv.DictReader(f))


def test_every_method_has_one_row_per_paired_image(per_image):
    csv_dir = per_image["root"] / "csv"
    fp, w4 = _csv(csv_dir / "fp32.csv"), _csv(csv_dir / "w4a4.csv")
    keys = lambda rows, method: sorted((r["checkpoint"], r["prompt"], r["seed"]) for r in rows if r["method"] == method)  # noqa: E731
    assert len(fp) == 8 and keys(w4, "plain PTQ") == keys(w4, "TAQ") == keys(fp, "full precision")
    assert len(set(keys(fp, "full precision"))) == 8
    assert all(float(r["dist_to_fp"]) == 0 for r in fp) and all(float(r["dist_to_fp"]) > 0 for r in w4)
    assert {r["judge_success"] for r in fp + w4} <= {"0", "1"}
    assert "**W4A4**" in per_image["output"] and "W4A4: TAQ" in per_image["output"]


def test_distances_are_measured_against_the_saved_full_precision_images(per_image):
    run = next((per_image["root"] / "run").iterdir())
    fp_images = np.load(run / "FP32" / "fp" / "teddy v1.npz")["images"]
    assert fp_images.shape == (4, 32, 32, 3) and fp_images.dtype == np.uint8


def test_a_second_call_resumes_and_renders_nothing(per_image):
    chunks = sorted((per_image["root"] / "run").rglob("*.json"))
    before = {p: p.stat().st_mtime_ns for p in chunks if p.name != "meta.json"}
    result = CliRunner().invoke(app, per_image["args"])
    assert result.exit_code == 0, result.output
    assert "0 images still to render" in result.output
    assert before == {p: p.stat().st_mtime_ns for p in before}


def test_unknown_methods_and_settings_are_refused(per_image):
    for flag, value in (("--methods", "plain PTQ,magic"), ("--settings", "W3A3")):
        args = list(per_image["args"])
        args[args.index(flag) + 1] = value
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "choose from" in result.output


def test_no_render_exports_the_same_csvs_from_the_run_folder(per_image):
    args = list(per_image["args"]) + ["--no-render"]
    args[args.index("--csv-dir") + 1] = str(per_image["root"] / "csv-again")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    for name in ("fp32.csv", "w4a4.csv"):
        assert (per_image["root"] / "csv-again" / name).read_text() == (per_image["root"] / "csv" / name).read_text()
