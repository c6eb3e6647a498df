"""TAQ's token analyzer and commands on a tiny pipeline saved to disk (as `from_pretrained` folders are)."""

import csv

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from personalq.cli import app
from personalq.random_pipelines import build_clip_tokenizer, tiny_sd15_pipeline
from personalq.taq import load_quantized, protection_kwargs
from personalq.taq.analyze import analyze_tokens, token_units, write_report
from personalq.eval.taq_bench import benchmark_settings, markdown_table

runner = CliRunner()
PROMPT = "a <teddybear> sitting in the park"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny-sd15")
    tiny_sd15_pipeline(0).save_pretrained(directory)
    return directory


def test_token_units_group_the_trigger_span():
    tokenizer = build_clip_tokenizer()
    units = token_units(tokenizer, "a <teddybear> and a <sks> dog")
    labels = [u.label for u in units]
    assert labels[0] == "<|startoftext|>" and labels[-1] == "<|endoftext|>"
    assert [u.label for u in units if u.is_trigger] == ["<teddybear>", "<sks>"]
    assert len(next(u for u in units if u.label == "<teddybear>").positions) > 2
    assert "a#2" in labels  # repeated words stay distinct
    positions = [p for u in units for p in u.positions]
    assert positions == list(range(len(positions)))  # every token exactly once, in order


def test_analyzer_measures_each_token_and_writes_table_and_charts(model_dir, tmp_path):
    from diffusers import DiffusionPipeline

    pipes = {name: DiffusionPipeline.from_pretrained(model_dir, local_files_only=True) for name in ("ckpt-a", "ckpt-b")}
    for pipe in pipes.values():
        pipe.set_progress_bar_config(disable=True)
    calls = []

    def brightness_scorer(image, text):
        calls.append(text)
        return float(np.asarray(image, dtype=np.float32).mean())

    records = analyze_tokens(pipes, PROMPT, bits=2, seeds=(0, 1), num_inference_steps=1, scorer=brightness_scorer)
    units = token_units(pipes["ckpt-a"].tokenizer, PROMPT)
    assert len(records) == 2 * 2 * len(units)
    assert {r.token for r in records if r.is_trigger} == {"<teddybear>"}
    assert all(r.mse >= 0 and r.drift is not None for r in records)
    assert any(r.mse > 0 for r in records)  # quantizing one token's K/V does move the image
    assert calls and set(calls) == {PROMPT}
    assert getattr(pipes["ckpt-a"].unet, "taq_state", None) is None  # the pipeline is left as it was

    written = write_report(records, tmp_path / "report", bits=2)
    names = {p.name for p in written}
    assert names == {"tokens.csv", "summary.md", "mse.png", "drift.png"}
    with open(tmp_path / "report" / "tokens.csv") as handle:
        assert len(list(csv.DictReader(handle))) == len(records)
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "| <teddybear> | yes |" in summary and "trigger tokens" in summary and "other tokens" in summary
    assert (tmp_path / "report" / "mse.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_analyze_tokens_command(model_dir, tmp_path):
    out = tmp_path / "tokens"
    result = runner.invoke(app, ["analyze", "tokens", "--model", str(model_dir), "--prompt", PROMPT, "--bits", "4", "--seed", "0", "--steps", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "mse.png").exists() and (out / "summary.md").exists() and not (out / "drift.png").exists()
    bad = runner.invoke(app, ["analyze", "tokens", "--model", str(tmp_path / "missing"), "--prompt", PROMPT, "--out", str(out)])
    assert bad.exit_code == 2 and "not a folder" in bad.output and len(bad.output.strip().splitlines()) == 1


def test_quantize_command_saves_a_model_that_loads(model_dir, tmp_path):
    from diffusers import DiffusionPipeline

    out = tmp_path / "w8a8"
    result = runner.invoke(app, ["quantize", str(model_dir), "--w", "8", "--a", "8", "--quantizer", "log", "--trigger", "<teddybear>", "--prompts", "2", "--steps", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "W8A8" in result.output and (out / "taq.json").exists()
    pipe = DiffusionPipeline.from_pretrained(model_dir, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    load_quantized(pipe, out)
    assert pipe.unet.taq_state.config.quantizer == "log"
    image = pipe(PROMPT, num_inference_steps=2, generator=torch.Generator().manual_seed(0), output_type="np", cross_attention_kwargs=protection_kwargs(pipe, [PROMPT])).images
    assert image.shape == (1, 32, 32, 3)
    bad = runner.invoke(app, ["quantize", str(model_dir), "--w", "3", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "w_bits=3" in bad.output and len(bad.output.strip().splitlines()) == 1


def test_benchmark_rows_and_table_on_the_tiny_pipeline():
    seen = []
    rows = benchmark_settings(["FP32", "FP16", "W8A8", "W4A4"], calls=1, calibration_steps=1, pipe_factory=tiny_sd15_pipeline, on_row=lambda r: seen.append(len(r)))
    assert seen == [1, 2, 3, 4]
    by_name = {r["setting"]: r for r in rows}
    fp32, fp16 = by_name["FP32"], by_name["FP16"]
    assert fp32["layer_bytes"] == 2 * fp16["layer_bytes"]
    assert fp32["layer_bytes"] / by_name["W8A8"]["layer_bytes"] >= 3.5
    assert fp32["layer_bytes"] / by_name["W4A4"]["layer_bytes"] >= 6
    assert fp32["bops"] == 4 * fp16["bops"] and fp16["seconds"] is None  # CPU: sized, not timed
    assert fp32["bops"] > by_name["W8A8"]["bops"] > by_name["W4A4"]["bops"]
    assert all(r["seconds"] > 0 for r in rows if r is not fp16)
    table = markdown_table(rows)
    assert table.count("\n") == 5 and "| W4A4 |" in table and "not timed" in table
