"""`personalq bench layers` on the tiny SD 1.5-layout model with tiny personal LoRAs and a seeded judge
(built as in test_quality_bench): groups, what each row keeps active, and the report."""

import json

import numpy as np
import pytest
from test_quality_bench import tiny_bench_inputs
from typer.testing import CliRunner

from personalq.cli import app
from personalq.eval import layer_sensitivity_bench as lsb


@pytest.fixture(scope="module")
def bench(tmp_path_factory, one_torch_thread):
    """One CLI run; every render call records the mode of every activation quantizer it ran with."""
    root = tmp_path_factory.mktemp("layers")
    judge_dir = tiny_bench_inputs(root)

    modes = []
    original = lsb.render

    def recording_render(pipe, *args, **kwargs):
        state = getattr(pipe.unet, "taq_state", None)
        modes.append(None if state is None else {name: q.mode for name, q in state.quantizers.items()})
        return original(pipe, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lsb, "render", recording_render)
        args = ["bench", "layers", "--setting", "W8A4", "--seeds", "1", "--steps", "2", "--model", str(root / "model"),
                "--concepts", str(root / "concepts.json"), "--judge", str(judge_dir), "--out", str(root / "out")]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    results = json.loads((root / "out" / "results.json").read_text())
    images = np.load(root / "out" / "images.npz")
    arrays = {row["row"]: images[f"{i:02d}"] for i, row in enumerate(results["rows"])}
    return {"root": root, "output": result.output, "results": results, "arrays": arrays, "modes": modes}


def _rows(bench, table):
    return [r for r in bench["results"]["rows"] if r["table"] == table]


def test_every_activation_point_lands_in_exactly_one_group(bench):
    from personalq.nano import load_pipeline
    from personalq.taq.activations import install_activation_quantizers
    from personalq.taq.config import QuantConfig

    groups = bench["results"]["groups"]
    names = [n for names in groups.values() for n in names]
    assert len(names) == len(set(names)) == len(bench["modes"][1])  # the tiny UNet's every point, once
    assert set(names) == set(bench["modes"][1])
    for group in ("cross-attn Q/K/V/A", "attention in/out projections", "feed-forward", "ResNet convs", "time embedding",
                  "samplers, conv_in/conv_out"):
        assert groups[group], group
    assert {n.rsplit(":", 1)[1] for n in groups["cross-attn Q/K/V/A"]} == {"q", "k", "v", "a"}
    # PQ-Nano's own points too (installing quantizers needs no calibration)
    unet = load_pipeline().unet
    state = install_activation_quantizers(unet, QuantConfig.from_setting("W8A4"), mode="off")
    nano = lsb.group_points(list(state.quantizers))
    assert sorted(n for names in nano.values() for n in names) == sorted(state.quantizers)
    assert all(nano.values())
    with pytest.raises(ValueError, match="exactly one"):
        lsb.group_points(["down_blocks.0.some_new_layer"])


def test_the_none_row_is_the_weights_only_model_and_differs_from_all(bench):
    from diffusers import StableDiffusionPipeline

    from personalq.eval.quality_bench import JudgeScorer, load_concepts
    from personalq.nano.judge import Judge
    from personalq.taq import quantize
    from personalq.taq.config import QuantConfig

    assert all(mode == "off" for mode in bench["modes"][1].values())  # render calls: FP, none, groups..., all
    pipe = StableDiffusionPipeline.from_pretrained(str(bench["root"] / "model"), local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    concepts = load_concepts(bench["root"] / "concepts.json")
    run = lsb.LayerBench(pipe, concepts, JudgeScorer(Judge.load(bench["root"] / "judge")), "W8A4",
                         lsb.bench_size(2, seeds=1, steps=2), guidance=7.5)
    assert [p["text"] for p in bench["results"]["prompts"]] == [p.text for p in run.prompts]
    weights_only = quantize(lsb._fresh_pipe(pipe), QuantConfig(w_bits=8, a_bits=32, protect="trigger"))
    images = lsb.render(run.attach(weights_only), concepts, run.prompts, 2, 7.5, quantized=True)
    expected = np.stack([np.asarray(im.convert("RGB")) for im in images]).astype(int)
    none, everything = bench["arrays"]["none (weights only)"].astype(int), bench["arrays"]["all (= W8A4)"].astype(int)
    assert np.abs(none - expected).max() <= 1  # the off-mode TAQ attention vs SDPA: float rounding only
    assert np.abs(everything - none).mean() > 1.0
    fp = bench["arrays"]["full precision"].astype(int)
    assert np.abs(everything - fp).mean() > np.abs(none - fp).mean()


def test_one_group_rows_keep_only_that_group_active(bench):
    groups = {g: names for g, names in bench["results"]["groups"].items() if names}
    layer_rows = _rows(bench, "layers")
    assert [r["row"] for r in layer_rows] == ["none (weights only)", *groups, "all (= W8A4)"]
    calls = bench["modes"][1 : 1 + len(layer_rows)]
    everything = bench["arrays"]["all (= W8A4)"]
    for row, modes in zip(layer_rows[1:-1], calls[1:-1]):
        active = set(groups[row["row"]])
        assert {n for n, m in modes.items() if m != "off"} == active, row["row"]
        assert all(modes[n] == "static" for n in active)
        assert row["points"] == len(active)
        assert not np.array_equal(bench["arrays"][row["row"]], everything), row["row"]
    assert set(calls[-1].values()) == {"static"}  # "all"


def test_calibration_rows_are_static_sks_world_and_dynamic(bench):
    rows = {r["row"]: r for r in _rows(bench, "calibration")}
    assert list(rows) == ["(a) static, <sks> prompts (serving)", "(b) static, PQ-Nano world prompts", "(c) dynamic, per-call ranges"]
    everything = next(r for r in _rows(bench, "layers") if r["row"] == "all (= W8A4)")
    assert rows["(a) static, <sks> prompts (serving)"]["change_per_image"] == everything["change_per_image"]
    modes = bench["modes"]
    assert set(modes[-2].values()) == {"dynamic"} and set(modes[-1].values()) == {"static"}  # (c), then (b)'s own UNet
    arrays = bench["arrays"]
    assert not np.array_equal(arrays["(b) static, PQ-Nano world prompts"], arrays["(a) static, <sks> prompts (serving)"])
    assert not np.array_equal(arrays["(c) dynamic, per-call ranges"], arrays["(a) static, <sks> prompts (serving)"])
    calibration = bench["results"]["calibration_prompts"]
    measured = {p["text"] for p in bench["results"]["prompts"]}
    world = calibration["world"]
    assert len(world) == len(set(world)) == len(calibration["<sks>"]) and not measured & set(world)
    assert all("<sks>" in p for p in calibration["<sks>"])
    for n in (1, 2):
        assert any(f"<teddy-v{n}>" in p for p in world)
    assert any("teddy" in p and "<" not in p for p in world)


def test_the_report_has_both_tables_with_every_row(bench):
    report = (bench["root"] / "out" / "report.md").read_text()
    assert report in bench["output"]
    assert "## Which layers hurt at W8A4" in report and "## Calibration at W8A4" in report
    assert report.count("| full precision |") == 2
    for row in bench["results"]["rows"]:
        line = next(line for line in report.splitlines() if line.startswith(f"| {row['row']} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[-1] == f"{row['n_trigger']} / {row['n_plain']}"
        assert cells[2] == ("0" if row["table"] == "reference" else f"{row['trigger_change']:.1f} ± {row['trigger_change_ci95']:.1f}")
    assert (bench["root"] / "out" / "grid.png").is_file()


def test_a_setting_without_quantized_activations_is_refused_in_one_line():
    result = CliRunner().invoke(app, ["bench", "layers", "--setting", "FP32"])
    assert result.exit_code == 2 and result.output.strip().count("\n") == 0 and "quantizes activations" in result.output
