"""`personalq repo ...` and `personalq bench store`: JSON for scripts, tables for people, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from safetensors.numpy import save_file
from typer.testing import CliRunner

from personalq.cli import app

runner = CliRunner()


def _lora(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    name = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn2_to_k"
    save_file(
        {f"{name}.lora_down.weight": rng.standard_normal((4, 768)).astype(np.float16),
         f"{name}.lora_up.weight": rng.standard_normal((320, 4)).astype(np.float16)},
        str(path),
        metadata={"modelspec.architecture": "stable-diffusion-v1/lora", "modelspec.trigger_phrase": "<bear-v4>",
                  "modelspec.date": "2025-04-11", "modelspec.tags": "bear, teddy bear"},
    )
    return path


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_add_list_show_export_remove(personalq_home, tmp_path):
    checkpoint = _lora(tmp_path / "bear.safetensors", 0)
    sidecar = tmp_path / "bear.json"
    sidecar.write_text(json.dumps({"description": "A tan plush bear in a pine forest", "style_tags": ["cartoon"]}))
    Image.new("RGB", (8, 8), "red").save(tmp_path / "bear.png")

    added = invoke("repo", "add", str(checkpoint), "--meta", str(sidecar), "--preview", str(tmp_path / "bear.png"), "--json")
    assert added.exit_code == 0, added.output
    card = json.loads(added.stdout)
    assert (card["id"], card["kind"], card["base_model"], card["triggers"]) == ("bear", "lora", "sd15", ["<bear-v4>"])
    assert (personalq_home / card["file"]).is_file() and (personalq_home / card["previews"][0]).is_file()

    table = invoke("repo", "list")
    assert table.exit_code == 0 and "<bear-v4>" in table.stdout and "cartoon" in table.stdout
    assert [c["id"] for c in json.loads(invoke("repo", "list", "--json", "--style", "cartoon").stdout)] == ["bear"]
    assert json.loads(invoke("repo", "list", "--json", "--from", "2025-05-01").stdout) == []
    assert json.loads(invoke("repo", "list", "--json", "--to", "2025-04-11").stdout)[0]["id"] == "bear"
    shown = json.loads(invoke("repo", "show", "bear", "--json").stdout)
    assert shown["raw_metadata"]["modelspec.trigger_phrase"] == "<bear-v4>" and shown["description"].startswith("A tan")
    assert "modelspec.architecture" in invoke("repo", "show", "bear").stdout

    exported = tmp_path / "catalog.jsonl"
    result = invoke("repo", "export", str(exported))
    assert result.exit_code == 0 and [json.loads(line)["id"] for line in exported.read_text().splitlines()] == ["bear"]

    assert invoke("repo", "remove", "bear").exit_code == 1  # confirmation declined (no input)
    assert invoke("repo", "remove", "bear", "--yes").exit_code == 0
    assert json.loads(invoke("repo", "list", "--json").stdout) == []
    assert not (personalq_home / card["file"]).exists()


def test_errors_are_one_line_with_a_nonzero_exit(personalq_home, tmp_path):
    pickle = tmp_path / "model.ckpt"
    pickle.write_bytes(b"\x80\x04pickle")
    refused = invoke("repo", "add", str(pickle))
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr.startswith("error: model.ckpt: pickle-based .ckpt") and refused.stderr.count("\n") == 1

    missing = invoke("repo", "show", "nope")
    assert missing.exit_code == 1 and missing.stderr.strip() == f"error: no checkpoint 'nope' in {personalq_home}"
    assert invoke("repo", "list", "--from", "last week").exit_code == 1
    assert invoke("repo", "load-catalog", str(tmp_path / "absent.jsonl")).exit_code == 1
    assert invoke("repo", "import", str(tmp_path / "absent")).exit_code == 1


def test_import_and_load_catalog_report_every_entry(personalq_home, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    _lora(folder / "bear.safetensors", 1)
    (folder / "old.pt").write_bytes(b"pickle")
    imported = invoke("repo", "import", str(folder), "--json")
    assert imported.exit_code == 1  # something was refused
    report = json.loads(imported.stdout)
    assert report["added"] == ["bear"] and [Path(r["source"]).name for r in report["refused"]] == ["old.pt"]

    catalog = tmp_path / "catalog.jsonl"
    good = {"id": "cat-v1", "triggers": ["<cat>"], "subject_types": ["cat"], "description": "a gray cat", "created_at": "2025-01-02"}
    catalog.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "cat-v2", "version": "two"}) + "\n")
    loaded = invoke("repo", "load-catalog", str(catalog))
    assert loaded.exit_code == 1
    assert "added 1, skipped 0, refused 1" in loaded.stdout and "catalog.jsonl:2: version" in loaded.stdout
    again = invoke("repo", "load-catalog", str(catalog), "--json")
    assert json.loads(again.stdout)["skipped"][0]["source"] == "catalog.jsonl:1"

    assert invoke("repo", "reindex").stdout.strip() == "reindexed 2 checkpoint(s)"


def test_python_dash_m_runs_the_same_cli(personalq_home):
    result = subprocess.run(
        [sys.executable, "-m", "personalq", "repo", "list", "--json"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


@pytest.mark.slow
def test_bench_store_prints_its_figures(personalq_home):
    result = invoke("bench", "store", "--sizes", "30", "--json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["results"][0]
    assert row["entries"] == 30
    assert set(row) >= {"load_catalog_s", "reindex_s", "reopen_s", "cards_s", "dense_query_ms", "sparse_query_ms"}
    assert invoke("bench", "store", "--sizes", "ten").exit_code == 1
