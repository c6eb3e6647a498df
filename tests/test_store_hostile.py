"""Issue 21 items 6 and 7: hostile metadata is refused in one line (or safely ignored where it is only a
hint), never a traceback; the CLI prints user text literally; `repo import` reports each bad file and
goes on; the catalog keeps a trimmed copy of a header's metadata.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personalq.cli import app
from personalq.store import RepoStore, StoreError
from personalq.store.metadata import MAX_STORED_METADATA_CHARS
from tests.test_store import entry, kohya_lora_sd15, modelspec_header, snapshot, write_checkpoint, write_png
from tests.test_store_security import bomb_png

DEEP = 50_000
runner = CliRunner()


@pytest.fixture(scope="module")
def embedder():
    from personalq.store.embedder import default_embedder

    return default_embedder()


@pytest.fixture
def store(personalq_home, embedder):
    opened = RepoStore.open(personalq_home, embedder=embedder)
    yield opened
    opened.close()


def lora(folder: Path, name: str = "cat", **metadata: str) -> Path:
    return write_checkpoint(folder / f"{name}.safetensors", kohya_lora_sd15(),
                            modelspec_header("stable-diffusion-v1/lora", f"<{name}>", name) | metadata)


def deeply_nested_header(folder: Path) -> Path:
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})[:-1] + ', "x": ' + "[" * DEEP + "]" * DEEP + "}"
    path = folder / "deep.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\0" * 4)
    return path


def sidecar(folder: Path, text: str, name: str = "side.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def ran_cleanly(result) -> bool:
    """No traceback: the command returned or exited, it did not raise."""
    return result.exception is None or isinstance(result.exception, SystemExit)


# ---------------------------------------------------------------- refusals in one line


REFUSED = {
    "header-nested-json": (lambda t: dict(path=deeply_nested_header(t)), "nested"),
    "sidecar-nested-yaml": (lambda t: dict(path=lora(t), meta=sidecar(t, "description: " + "[" * DEEP + "]" * DEEP)), "nested"),
    "sidecar-nested-json": (lambda t: dict(path=lora(t), meta=sidecar(t, '{"a": ' + "[" * DEEP + "]" * DEEP + "}", "side.json")), "nested"),
    "sidecar-alias-bomb": (lambda t: dict(path=lora(t), meta=sidecar(t, "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)))), "values"),
    "sidecar-date-year-9999": (lambda t: dict(path=lora(t), meta=sidecar(t, "created_at: 9999-12-31T23:59:59-05:00\n")), "created_at"),
    "sidecar-date-inf": (lambda t: dict(path=lora(t), meta={"created_at": "inf"}), "created_at"),
    "sidecar-nul-in-description": (lambda t: dict(path=lora(t), meta={"description": "a\x00b"}), "NUL"),
    "sidecar-huge-version": (lambda t: dict(path=lora(t), meta={"version": 10**30}), "version"),
    "header-date-year-9999-with-offset": (lambda t: dict(path=lora(t, **{"modelspec.date": "9999-12-31T23:59:59-05:00"}), meta={"created_at": "9999-12-31"}), "created_at"),
    "markup-in-id": (lambda t: dict(path=lora(t), meta={"id": "[/x]"}), "[/x]"),
    "bomb-preview": (lambda t: dict(path=lora(t), previews=[_bytes(t / "bomb.png", bomb_png())]), "unreadable image"),
}


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("build,reason", list(REFUSED.values()), ids=list(REFUSED))
def test_hostile_metadata_is_refused_in_one_line_and_changes_nothing(store, tmp_path, build, reason):
    before = snapshot(store)
    with pytest.raises(StoreError) as refused:
        store.add(**build(tmp_path))
    assert reason in str(refused.value) and "\n" not in str(refused.value)
    assert snapshot(store) == before


# ---------------------------------------------------------------- hints that are junk are ignored, not fatal


@pytest.mark.parametrize(
    "metadata",
    [
        {"modelspec.date": "inf"},
        {"modelspec.date": "9999-12-31T23:59:59-05:00"},
        {"modelspec.date": "nan", "ss_training_started_at": "1e300"},
        {"ss_tag_frequency": json.dumps({"a": {"sks cat": "many", "cat": [1], "toy": 1e308, "x": True}})},
        {"ss_tag_frequency": '{"a": {"cat": 1e999}}'},
        {"ss_tag_frequency": json.dumps(["not", "a", "dict"])},
        {"ss_tag_frequency": "[" * DEEP + "]" * DEEP},
    ],
    ids=["date-inf", "date-9999", "date-nan-and-1e300", "tag-frequency-wrong-types", "tag-frequency-infinity",
         "tag-frequency-list", "tag-frequency-nested"],
)
def test_junk_header_hints_are_ignored_and_the_checkpoint_is_usable(store, tmp_path, metadata):
    card = store.add(lora(tmp_path, **metadata))
    assert card.trigger == "<cat>" and 1970 <= card.created_at.year <= 2200
    assert store.dense_search("cat", 1)[0][0] == "cat"


def test_a_16_mib_header_is_stored_trimmed(store, tmp_path):
    card = store.add(lora(tmp_path, "big", ss_dataset_dirs="x" * (8 * 2**20), **{f"junk{i}": "y" * 30_000 for i in range(200)}))
    assert card.file_path.stat().st_size > 13 * 2**20  # the file keeps its whole header
    stored = json.dumps(card.raw_metadata)
    assert len(stored) <= MAX_STORED_METADATA_CHARS + 2048
    assert card.raw_metadata["ss_dataset_dirs"].endswith("[trimmed]") and card.raw_metadata["modelspec.title"] == "big"


# ---------------------------------------------------------------- the CLI


def test_cli_prints_markup_in_user_text_literally(personalq_home, tmp_path):
    checkpoint = lora(tmp_path, "bear")
    added = runner.invoke(app, ["repo", "add", str(checkpoint), "--meta", str(sidecar(tmp_path, 'triggers: ["[/x]", "[bold red]b[/]"]\ndescription: "[link=https://evil.example]click[/link]"\n'))])
    assert added.exit_code == 0 and ran_cleanly(added), added.output
    listed = runner.invoke(app, ["repo", "list"])
    assert listed.exit_code == 0 and ran_cleanly(listed) and "[/x]" in listed.output
    shown = runner.invoke(app, ["repo", "show", "bear"])
    assert shown.exit_code == 0 and "[/x]" in shown.output and "[link=https://evil.example]click[/link]" in shown.output.replace("\n", "")
    refused = runner.invoke(app, ["repo", "add", str(lora(tmp_path, "other")), "--meta", str(sidecar(tmp_path, "id: '[/x]'\n"))])
    assert refused.exit_code == 1 and ran_cleanly(refused) and "'[/x]' is not a valid id" in refused.output


def test_load_catalog_refuses_null_bytes_line_by_line(personalq_home, tmp_path):
    lines = [
        json.dumps(entry(id="good")),
        json.dumps(entry(id="nul\u0000id")),
        json.dumps(entry(id="nul-description", description="a\u0000b")),
        json.dumps(entry(id="nul-file", file="checkpoints/a\u0000b.safetensors")),
        json.dumps(entry(id="nul-preview", previews=["previews/a\u0000.png"])),
        '{"id": "raw-nul\x00"}',
        json.dumps(entry(id="deep", style_tags="[" * 10 + "]" * 10)) [:-1] + ', "x": ' + "[" * DEEP + "]" * DEEP + "}",
        json.dumps(entry(id="late", created_at="9999-12-31T23:59:59-05:00")),
    ]
    catalog = tmp_path / "catalog.jsonl"
    catalog.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["repo", "load-catalog", str(catalog)])
    assert ran_cleanly(result) and result.exit_code == 1, result.output
    assert "added 1, skipped 0, refused 7" in result.output
    refusals = [line for line in result.output.splitlines() if line.startswith("  refused ")]
    assert [line.split(":")[1] for line in refusals] == [str(n) for n in range(2, 9)]


def test_import_reports_each_bad_file_and_goes_on(personalq_home, tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    lora(folder, "a-good")
    lora(folder, "b-dates", **{"modelspec.date": "inf"})  # a junk hint: still added
    deeply_nested_header(folder)
    lora(folder, "d-bomb")
    (folder / "d-bomb.png").write_bytes(bomb_png())
    lora(folder, "e-nested-sidecar")
    sidecar(folder, "description: " + "[" * DEEP + "]" * DEEP, "e-nested-sidecar.yaml")
    lora(folder, "f-markup")
    sidecar(folder, "id: '[/x]'\n", "f-markup.yaml")
    lora(folder, "g-good")
    result = runner.invoke(app, ["repo", "import", str(folder)])
    assert ran_cleanly(result) and result.exit_code == 1, result.output
    assert "added 3, skipped 0, refused 4" in result.output
    for name in ("deep.safetensors", "d-bomb.safetensors", "e-nested-sidecar.safetensors", "f-markup.safetensors"):
        assert sum(name in line and line.startswith("  refused ") for line in result.output.splitlines()) == 1
    with RepoStore.open(personalq_home) as store:
        assert sorted(c.id for c in store.cards()) == ["a-good", "b-dates", "g-good"]
