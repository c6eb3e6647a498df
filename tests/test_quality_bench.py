"""The quality benchmark, `--quick`, on a tiny SD 1.5-layout model with tiny personal LoRAs and a seeded judge.

The judge here is the real JudgeNet with seeded random weights: its verdicts mean nothing about the
images, but they are deterministic, so the tests can check that every figure is computed from the
images the cell really generated.
"""

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from personalq.cli import app
from personalq.eval.quality_bench import QUICK, Cell, cells_for

LORA_MODULES = ["to_q", "to_k", "to_v", "to_out.0"]


def _tiny_lora(pipe, path, trigger, seed):
    """A real personalized-LoRA file for the tiny model: a non-zero random LoRA on attention, one trigger row."""
    from diffusers.utils import convert_state_dict_to_diffusers
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    from personalq.personalize import ModelSpec, save_personalized_lora

    torch.manual_seed(seed)
    pipe.unet.add_adapter(LoraConfig(r=2, lora_alpha=2, init_lora_weights=False, target_modules=LORA_MODULES), adapter_name="t")
    state = convert_state_dict_to_diffusers(get_peft_model_state_dict(pipe.unet, adapter_name="t"))
    pipe.unet.delete_adapters("t")
    hidden = pipe.text_encoder.get_input_embeddings().weight.shape[1]
    spec = ModelSpec(title=trigger, triggers=[trigger], architecture="tiny/lora", resolution="32x32", class_noun="teddy")
    return save_personalized_lora(path, state, {trigger: torch.randn(1, hidden)}, spec,
                                  {"r": 2, "lora_alpha": 2, "target_modules": LORA_MODULES})


def tiny_bench_inputs(root):
    """A tiny SD 1.5-layout model folder, two personal LoRAs with their concepts.json, and an
    untrained judge, under `root`: what the benchmark commands read. Returns the judge folder."""
    from personalq.nano.judge import Judge, JudgeNet
    from personalq.nano.world import VOCAB
    from personalq.random_pipelines import tiny_sd15_pipeline

    pipe = tiny_sd15_pipeline(0)
    pipe.save_pretrained(root / "model")
    torch.manual_seed(0)
    judge_dir = Judge(JudgeNet(VOCAB, width=8)).save(root / "judge")
    concepts = []
    for n in (1, 2):
        trigger = f"<teddy-v{n}>"
        _tiny_lora(pipe, root / f"teddy{n}.safetensors", trigger, seed=n)
        concepts.append({"name": f"teddy v{n}", "trigger": trigger, "class_noun": "teddy",
                         "lora": f"teddy{n}.safetensors", "looks": {"color": "red", "accessory": "hat"}})
    (root / "concepts.json").write_text(json.dumps(concepts))
    return judge_dir


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("quality")
    judge_dir = tiny_bench_inputs(root)
    args = ["bench", "quality", "--quick", "--steps", "2", "--settings", "FP32,W8A8,W4A4", "--model", str(root / "model"), "--concepts", str(root / "concepts.json"),
            "--judge", str(judge_dir), "--out", str(root / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = {Cell(r["setting"], r["method"], r["quantizer"]).key: r for r in json.loads((root / "out" / "results.json").read_text())}
    return {"root": root, "out": root / "out", "args": args, "output": result.output, "rows": rows, "judge": judge_dir}


def test_quick_run_writes_every_cell_the_tables_and_the_grid(bench):
    from PIL import Image

    assert set(bench["rows"]) == {c.key for c in cells_for(QUICK)}
    report = (bench["out"] / "report.md").read_text()
    for method in ("full precision", "plain PTQ", "start token", "TAQ", "TAQ + start token"):
        assert f"| {method} |" in report
    assert "W4A4 fidelity %" in report and "| log | TAQ |" in report
    grid = Image.open(bench["out"] / "grid.png")
    assert grid.width > 3 * 32 and grid.height > 4 * 32  # 4 method rows x 3 setting columns


def test_fewer_bits_mean_fewer_resident_bytes_and_bit_operations(bench):
    rows = bench["rows"]
    fp, w8, w4 = rows["FP32-fp-linear"], rows["W8A8-none-linear"], rows["W4A4-none-linear"]
    assert fp["unet_bytes"] > w8["unet_bytes"] > w4["unet_bytes"]
    assert fp["bops"] > w8["bops"] > w4["bops"]
    assert all(r["seconds_per_image"] > 0 for r in rows.values())


def test_fidelity_and_alignment_are_what_the_judge_reads_off_the_cell_images(bench):
    from personalq.eval.quality_bench import JudgeScorer, mean_ci95
    from personalq.nano.judge import Judge

    scorer = JudgeScorer(Judge.load(bench["judge"]))
    per_concept = QUICK.trigger_prompts * QUICK.seeds
    for key in ("FP32-fp-linear", "W4A4-trigger-linear"):
        images = np.load(bench["out"] / "cells" / f"{key}.npz")["images"]
        assert len(images) == bench["rows"][key]["images"] == 2 * per_concept + QUICK.world_captions * QUICK.seeds
        hits = scorer.looks_found(images[: 2 * per_concept], {"color": "red", "accessory": "hat"})
        assert hits == bench["rows"][key]["fidelity_hits"]
        assert bench["rows"][key]["trigger_fidelity"] == pytest.approx(mean_ci95([float(h) for h in hits])[0])


def test_quantization_and_protection_change_the_trigger_images(bench):
    cells = bench["out"] / "cells"
    load = lambda key: np.load(cells / f"{key}.npz")["images"].astype(float)  # noqa: E731
    fp, ptq, taq = load("FP32-fp-linear"), load("W4A4-none-linear"), load("W4A4-trigger-linear")
    trigger_images = slice(0, 2 * QUICK.trigger_prompts * QUICK.seeds)
    assert np.abs(ptq - fp).mean() > 0
    assert np.abs(taq[trigger_images] - ptq[trigger_images]).mean() > 0


def test_a_second_run_reuses_the_cached_cells(bench):
    before = {p.name: p.stat().st_mtime_ns for p in (bench["out"] / "cells").glob("*.json")}
    result = CliRunner().invoke(app, bench["args"])
    assert result.exit_code == 0, result.output
    assert result.output.count(": cached") == len(cells_for(QUICK))
    assert before == {p.name: p.stat().st_mtime_ns for p in (bench["out"] / "cells").glob("*.json")}


def test_a_missing_concept_file_is_refused_in_one_line(tmp_path):
    result = CliRunner().invoke(app, ["bench", "quality", "--quick", "--concepts", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "does not exist" in result.output


def test_few_sample_frechet_distance_equals_the_matrix_square_root_form():
    from personalq.eval.fd_effnet import frechet_distance
    from personalq.eval.quality_bench import frechet_distance_few

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(12, 300)), rng.normal(size=(9, 300)) * 1.3 + 0.2
    assert frechet_distance_few(a, b, lambda x: x) == pytest.approx(frechet_distance(a, b), rel=1e-5)


def test_token_sensitivity_aggregates_triggers_over_concepts(bench):
    from diffusers import StableDiffusionPipeline

    from personalq.eval.quality_bench import load_concepts
    from personalq.eval.token_sensitivity_bench import CLASS_LABEL, TRIGGER_LABEL, token_sensitivity
    from personalq.nano.judge import Judge

    pipe = StableDiffusionPipeline.from_pretrained(str(bench["root"] / "model"), local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    concepts = load_concepts(bench["root"] / "concepts.json")
    records = token_sensitivity(pipe, concepts, Judge.load(bench["judge"]), bits=2, seeds=(0,), steps=2)
    triggers = [r for r in records if r.token == TRIGGER_LABEL]
    assert {r.checkpoint for r in triggers} == {c.name for c in concepts} and all(r.is_trigger for r in triggers)
    whole = len(pipe.tokenizer.tokenize("teddy")) == 1  # only a one-token class noun is relabelled
    assert sum(r.token == CLASS_LABEL for r in records) == (len(concepts) if whole else 0)
    assert all(r.drift is not None and r.mse >= 0 for r in records)
    assert any(r.mse > 0 for r in triggers)  # quantizing the trigger's K/V rows moves the image
    assert not getattr(pipe.unet, "peft_config", None) or not pipe.unet.active_adapters()


def test_e2e_selects_rewrites_and_serves_every_setting(bench, tmp_path):
    from personalq.eval.e2e_bench import e2e_table, run_e2e, select_all
    from personalq.eval.quality_bench import JudgeScorer, load_concepts
    from personalq.nano.judge import Judge
    from personalq.random_pipelines import tiny_sd15_pipeline
    from personalq.serving import PipelineManager, ServingConfig
    from personalq.store import RepoStore

    store = RepoStore.open(tmp_path / "store")
    for n, style in ((1, "cartoon"), (2, "watercolor")):
        store.add(bench["root"] / f"teddy{n}.safetensors", meta={
            "id": f"teddy-v{n}", "triggers": [f"<teddy-v{n}>"], "subject_types": ["teddy"], "style_tags": [style],
            "description": f"a {style} teddy", "created_at": f"2025-0{n}-10", "category": "teddy", "kind": "lora"})
    truth = {"checkpoint_id": "teddy-v2", "requires_clarification": False, "no_match": False, "plausible_ids": [],
             "clarification_answer": None, "final_checkpoint_id": None}
    requests = [{"instance_id": "r1", "query": "my watercolor teddy holding a balloon", "now": "2026-01-01T00:00:00Z",
                 "ground_truth": truth, "subject_words": ["teddy"]}]
    selections = select_all(store, requests)
    by_selector = {s.selector: s for s in selections}
    assert by_selector["checkin"].chosen == "teddy-v2" and "<teddy-v2>" in by_selector["checkin"].prompt
    assert "teddy " not in by_selector["checkin"].prompt.replace("<teddy-v2>", "")
    assert by_selector["random"].chosen in ("teddy-v1", "teddy-v2")
    assert f"<{by_selector['random'].chosen}>" in by_selector["random"].prompt

    config = ServingConfig(quantized_dir=tmp_path / "quantized", calibration_prompts=2, calibration_steps=2)
    managers = []

    def make_manager():
        managers.append(PipelineManager.from_pipeline(tiny_sd15_pipeline(0), "sd15", config, store=store))
        return managers[-1]

    concepts = {f"teddy-v{n}": c for n, c in zip((1, 2), load_concepts(bench["root"] / "concepts.json"))}
    rows = run_e2e(make_manager, JudgeScorer(Judge.load(bench["judge"])), selections, concepts, ["W8A8"], steps=2, log=lambda _: None)
    assert len(rows) == len(selections) * 2  # plain PTQ and TAQ
    assert not any(r["error"] for r in rows)
    assert {(r["selector"], r["taq"]) for r in rows} == {(s, t) for s in ("random", "checkin") for t in (False, True)}
    assert all((tmp_path / "quantized" / f"W8A8-{protect}" / "taq.json").exists() for protect in ("none", "trigger"))
    assert {name for name, kind, _ in managers[0].resident() if kind == "quantized"} <= {
        "quantized:base:W8A8:none", "quantized:base:W8A8:trigger"}  # as many as fit in one full-precision UNet's bytes
    table = e2e_table(rows)
    for line in ("| random + plain PTQ |", "| Check-in + plain PTQ |", "| random + TAQ |", "| Check-in + TAQ |"):
        assert line in table
