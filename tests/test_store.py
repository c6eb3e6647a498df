"""The repository store: checkpoint kinds, metadata precedence, refusals that change nothing, repair, scale.

Checkpoints are small random state dicts saved with `safetensors`, under the tensor names and
shapes the real formats use (kohya and PEFT LoRA, textual-inversion embeddings, full UNet
checkpoints), with the ModelSpec and kohya header keys that real trainers write.
"""

from __future__ import annotations

import hashlib
import json
import struct
from datetime import date, datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from safetensors.numpy import save_file

from personalq.store import DuplicateError, RepoStore, StoreError
from personalq.eval.store_bench import synthetic_catalog
from personalq.store.embedder import default_embedder

RNG = np.random.default_rng(0)


def _tensor(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float16)


def kohya_lora_sd15() -> dict[str, np.ndarray]:
    prefix = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn2"
    return {
        f"{prefix}_to_k.lora_down.weight": _tensor(4, 768),
        f"{prefix}_to_k.lora_up.weight": _tensor(320, 4),
        f"{prefix}_to_k.alpha": np.array(4.0, dtype=np.float16),
        "lora_unet_mid_block_attentions_0_transformer_blocks_0_attn1_to_q.lora_down.weight": _tensor(4, 1280),
        "lora_unet_mid_block_attentions_0_transformer_blocks_0_attn1_to_q.lora_up.weight": _tensor(1280, 4),
    }


def peft_lora_sdxl() -> dict[str, np.ndarray]:
    prefix = "unet.down_blocks.1.attentions.0.transformer_blocks.0.attn2"
    return {
        f"{prefix}.to_k.lora_A.weight": _tensor(4, 2048),
        f"{prefix}.to_k.lora_B.weight": _tensor(640, 4),
        f"{prefix}.to_q.lora_A.weight": _tensor(4, 640),
        f"{prefix}.to_q.lora_B.weight": _tensor(640, 4),
    }


def pq_nano_lora() -> dict[str, np.ndarray]:
    """A PEFT-named UNet LoRA on PQ-Nano's first cross-attention (text 384 wide, 64 channels)."""
    prefix = "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn2"
    return {f"{prefix}.to_k.lora_A.weight": _tensor(4, 384), f"{prefix}.to_k.lora_B.weight": _tensor(64, 4)}


def textual_inversion_sd15() -> dict[str, np.ndarray]:
    return {"emb_params": _tensor(2, 768)}


def textual_inversion_sdxl() -> dict[str, np.ndarray]:
    return {"clip_l": _tensor(2, 768), "clip_g": _tensor(2, 1280)}


def dreambooth_sd15() -> dict[str, np.ndarray]:
    return {
        "model.diffusion_model.input_blocks.0.0.weight": _tensor(320, 4, 3, 3),
        "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight": _tensor(320, 768),
        "model.diffusion_model.out.2.weight": _tensor(4, 320, 3, 3),
        "first_stage_model.decoder.conv_in.weight": _tensor(8, 4, 3, 3),
        "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight": _tensor(16, 768),
    }


def dreambooth_pq_nano() -> dict[str, np.ndarray]:
    """A whole PQ-Nano UNet in diffusers' layout: what a DreamBooth fine-tune of the shipped base saves."""
    from personalq.store.weights import base_shapes

    return {name: _tensor(*shape) for name, shape in base_shapes("pq-nano").unet_shapes().items()}


def dreambooth_sdxl() -> dict[str, np.ndarray]:
    return {
        "model.diffusion_model.input_blocks.0.0.weight": _tensor(320, 4, 3, 3),
        "model.diffusion_model.input_blocks.4.1.transformer_blocks.0.attn2.to_k.weight": _tensor(640, 2048),
        "conditioner.embedders.1.model.ln_final.weight": _tensor(1280),
        "model.diffusion_model.label_emb.0.0.weight": _tensor(8, 2816),
    }


KOHYA_HEADER = {
    "ss_output_name": "bear-v4",
    "ss_base_model_version": "sd_v1",
    "ss_network_module": "networks.lora",
    "ss_training_started_at": str(datetime(2025, 4, 11, 9, 30, tzinfo=timezone.utc).timestamp()),
    "ss_tag_frequency": json.dumps({"10_bear": {"sks bear": 12, "plush toy": 9, "teddy bear": 7}}),
}


def modelspec_header(architecture: str, trigger: str, title: str, **extra: str) -> dict[str, str]:
    return {
        "modelspec.sai_model_spec": "1.0.0",
        "modelspec.architecture": architecture,
        "modelspec.title": title,
        "modelspec.trigger_phrase": trigger,
        "modelspec.date": "2025-02-03T12:00:00Z",
        "modelspec.description": f"{title}, trained on twelve photos",
        "modelspec.tags": "cat, kitten",
        **extra,
    }


def write_checkpoint(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=metadata)
    return path


def write_png(path: Path, colour: str = "red") -> Path:
    Image.new("RGB", (8, 8), colour).save(path)
    return path


ENTRY = {
    "id": "bear-v4",
    "triggers": ["<bear-v4>", "<teddy>"],
    "subject_types": ["bear", "teddy bear", "plush toy"],
    "style_tags": ["cartoon"],
    "description": "A small plush teddy bear, tan with a cream snout and belly, photographed in a pine forest.",
    "created_at": "2025-04-11T09:30:00Z",
    "version": 4,
    "environment": ["forest"],
    "last_used_at": "2025-06-02T18:00:00Z",
    "category": "bear",
    "base_model": "sd15",
    "kind": "lora",
}


def entry(**changes) -> dict:
    return {**ENTRY, **changes}


def snapshot(store: RepoStore) -> dict:
    """Everything a refusal must leave untouched: catalog, files, both indexes, counters."""
    files = {
        p.relative_to(store.home).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in store.home.rglob("*")
        if p.is_file() and p.parts[len(store.home.parts)] not in ("chroma",) and p.name != "catalog.db"
    }
    from sqlmodel import Session, func, select

    from personalq.store.tables import CheckpointValue, DescriptionEmbedding

    with Session(store._engine) as session:
        values = session.exec(select(func.count()).select_from(CheckpointValue)).one()
        cached = session.exec(select(func.count()).select_from(DescriptionEmbedding)).one()
    return {
        "revision": store.revision,
        "catalog": [(c.to_catalog_entry(store.home), c.added_at, c.updated_at, c.raw_metadata) for c in store.cards()],
        "values": values,
        "embedding_cache": cached,
        "files": files,
        "dense": store._dense.entries(),
        "sparse": store.sparse_search("bear cat dog forest cartoon april 2025", 50),
    }


@pytest.fixture(scope="session")
def embedder():
    return default_embedder()


@pytest.fixture
def store(personalq_home, embedder):
    opened = RepoStore.open(embedder=embedder)
    yield opened
    opened.close()


# ---------------------------------------------------------------- kinds and metadata


@pytest.mark.parametrize(
    ("build", "metadata", "kind", "base"),
    [
        (kohya_lora_sd15, KOHYA_HEADER, "lora", "sd15"),
        (peft_lora_sdxl, {"lora_adapter_metadata": json.dumps({"r": 4, "lora_alpha": 4})}, "lora", "sdxl"),
        (textual_inversion_sd15, None, "textual_inversion", "sd15"),
        (textual_inversion_sdxl, modelspec_header("stable-diffusion-xl-v1-base/textual-inversion", "<cat-ti>", "Gray cat"), "textual_inversion", "sdxl"),
        (dreambooth_pq_nano, {"modelspec.architecture": "pq-nano"}, "dreambooth", "pq-nano"),
    ],
    ids=["lora-kohya-sd15", "lora-peft-sdxl", "ti-sd15", "ti-sdxl-modelspec", "dreambooth-pq-nano"],
)
def test_each_kind_round_trips_through_the_store(store, tmp_path, embedder, build, metadata, kind, base):
    source = write_checkpoint(tmp_path / "in" / "thing.safetensors", build(), metadata)
    sidecar = {"subject_types": ["bear"], "description": "a test subject on a table"}
    card = store.add(source, meta=sidecar)

    assert (card.kind, card.base_model) == (kind, base)
    assert card.file_path.parent == store.home / "checkpoints"
    assert card.file_path.read_bytes() == source.read_bytes()
    assert card.sha256 == hashlib.sha256(source.read_bytes()).hexdigest()
    assert card.size_bytes == source.stat().st_size
    assert card.raw_metadata == (metadata or {})
    assert store.dense_search("a test subject on a table", 1) == [(card.id, pytest.approx(1.0, abs=1e-4))]

    store.close()
    reopened = RepoStore.open(embedder=embedder)
    assert reopened.get(card.id) == card
    reopened.remove(card.id)
    assert reopened.cards() == [] and not card.file_path.exists()
    assert reopened._dense.entries() == {} and reopened.sparse_search("bear", 5) == []
    reopened.close()


@pytest.mark.parametrize(("build", "base"), [(dreambooth_sd15, "sd15"), (dreambooth_sdxl, "sdxl")])
def test_original_layout_dreambooth_is_recognised_by_its_shapes(store, tmp_path, build, base):
    """Kind and base come from tensor names and widths; these partial UNets are refused on add (see test_store_weights)."""
    found = store.read_file_metadata(write_checkpoint(tmp_path / "db.safetensors", build()))
    assert (found["kind"], found["base_model"]) == ("dreambooth", base)


def test_kohya_header_prefills_the_context_tuple(store, tmp_path):
    source = write_checkpoint(tmp_path / "bear.safetensors", kohya_lora_sd15(), KOHYA_HEADER)
    card = store.add(source, meta={"description": "plush bear"})
    assert card.id == "bear-v4"  # ss_output_name
    assert card.triggers == ["sks bear"]  # the most frequent caption tag
    assert card.subject_types == ["plush toy", "teddy bear"]
    assert card.created_at == datetime(2025, 4, 11, 9, 30, tzinfo=timezone.utc)
    assert card.category == "plush toy"


def test_modelspec_header_prefills_and_names_the_base(store, tmp_path):
    # Shapes alone say nothing (PQ-Nano's 384-wide text is no SD width); the ModelSpec architecture names the base.
    header = modelspec_header("pq-nano-v1/lora", "<cat-v2>, <tabby>", "Gray cat v2")
    source = write_checkpoint(tmp_path / "cat.safetensors", pq_nano_lora(), header)
    card = store.add(source)
    assert (card.kind, card.base_model) == ("lora", "pq-nano")
    assert card.triggers == ["<cat-v2>", "<tabby>"] and card.trigger == "<cat-v2>"
    assert card.subject_types == ["cat", "kitten"] and card.category == "cat"
    assert card.description == "Gray cat v2, trained on twelve photos"
    assert card.created_at == datetime(2025, 2, 3, 12, tzinfo=timezone.utc)


def test_sidecar_wins_over_the_header(store, tmp_path):
    header = modelspec_header("stable-diffusion-v1/lora", "<from-header>", "Header title")
    source = write_checkpoint(tmp_path / "cat.safetensors", peft_lora_sdxl(), header)  # the header is wrong about the base
    sidecar = tmp_path / "cat.yaml"
    sidecar.write_text(
        "id: cat-v3\ntriggers: <from-sidecar>\nsubject_types: [kitten, cat]\ndescription: from the sidecar\n"
        "created_at: 2024-12-25\nbase_model: sdxl\nversion: 3\nstyle_tags: [watercolor]\n"
    )
    expected = store.read_file_metadata(source, sidecar)
    assert expected["triggers"] == "<from-sidecar>" and expected["base_model"] == "sdxl" and expected["kind"] == "lora"
    assert expected["raw_metadata"]["modelspec.title"] == "Header title"
    assert store.cards() == []  # reading metadata adds nothing

    card = store.add(source, meta=sidecar)
    assert card.id == "cat-v3"
    assert card.triggers == ["<from-sidecar>"]
    assert card.subject_types == ["kitten", "cat"] and card.category == "kitten"
    assert card.description == "from the sidecar"
    assert card.created_at == datetime(2024, 12, 25, tzinfo=timezone.utc)
    assert (card.base_model, card.kind, card.version, card.style_tags) == ("sdxl", "lora", 3, ["watercolor"])
    assert card.raw_metadata["modelspec.trigger_phrase"] == "<from-header>"  # the file's own metadata is kept


def test_import_dir_takes_sidecars_and_previews_and_skips_duplicates(store, tmp_path):
    folder = tmp_path / "mine"
    write_checkpoint(folder / "bear.safetensors", kohya_lora_sd15(), KOHYA_HEADER)
    (folder / "bear.yaml").write_text("subject_types: [bear]\ndescription: a plush bear\n")
    write_png(folder / "bear.png")
    write_png(folder / "bear.2.jpg", "blue")
    write_checkpoint(folder / "cat.safetensors", textual_inversion_sdxl(), modelspec_header("stable-diffusion-xl-v1-base/textual-inversion", "<cat>", "Cat"))
    (folder / "copy").mkdir()
    (folder / "old.ckpt").write_bytes(b"\x80\x04pickled")

    report = store.import_dir(folder)
    assert sorted(report.added) == ["bear-v4", "cat"] and report.skipped == []
    assert [Path(source).name for source, _ in report.refused] == ["old.ckpt"]
    bear = store.get("bear-v4")
    assert [p.name for p in bear.previews] == ["0.jpg", "1.png"]
    assert all(p.is_file() and p.is_relative_to(store.home) for p in bear.previews)

    again = store.import_dir(folder)
    assert again.added == [] and len(again.skipped) == 2
    assert all("duplicate SHA-256" in reason for _, reason in again.skipped)


def test_modelspec_thumbnail_becomes_a_preview(store, tmp_path):
    import base64
    import io

    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), "green").save(buffer, format="PNG")
    thumbnail = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    header = modelspec_header("stable-diffusion-v1/lora", "<cat>", "Cat", **{"modelspec.thumbnail": thumbnail})
    card = store.add(write_checkpoint(tmp_path / "cat.safetensors", kohya_lora_sd15(), header))
    assert [p.name for p in card.previews] == ["0.png"]
    with Image.open(card.previews[0]) as stored:
        assert stored.size == (4, 4) and stored.convert("RGB").getpixel((0, 0)) == (0, 128, 0)


def test_duplicate_weights_and_duplicate_ids(store, tmp_path):
    source = write_checkpoint(tmp_path / "a.safetensors", kohya_lora_sd15(), KOHYA_HEADER)
    store.add(source, meta={"description": "first"})
    with pytest.raises(DuplicateError, match="duplicate SHA-256"):
        store.add(source, meta={"id": "another-name", "description": "first"})
    other = write_checkpoint(tmp_path / "b.safetensors", kohya_lora_sd15(), KOHYA_HEADER)  # new random weights
    with pytest.raises(StoreError, match="duplicate id 'bear-v4'"):
        store.add(other, meta={"description": "second"})
    with pytest.raises(StoreError, match="duplicate id 'bear-v4'"):
        store.add_entry(entry())


# ---------------------------------------------------------------- refusals leave the store unchanged


def _pickle_file(tmp_path: Path, suffix: str) -> Path:
    path = tmp_path / f"model{suffix}"
    path.write_bytes(b"\x80\x04\x95pickled state dict")
    return path


def _truncated(tmp_path: Path) -> Path:
    full = write_checkpoint(tmp_path / "full.safetensors", dreambooth_sd15())
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    return cut


def _corrupt_header(tmp_path: Path) -> Path:
    path = tmp_path / "corrupt.safetensors"
    path.write_bytes(struct.pack("<Q", 16) + b"{not json at all" + b"\0" * 64)
    return path


def _bad_offsets(tmp_path: Path) -> Path:
    header = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 9999]}}).encode()
    path = tmp_path / "offsets.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 64)
    return path


def _huge_header(tmp_path: Path) -> Path:
    path = tmp_path / "huge.safetensors"
    path.write_bytes(struct.pack("<Q", 200 * 1024 * 1024) + b"{}")
    return path


def _valid(tmp_path: Path) -> Path:
    return write_checkpoint(tmp_path / "ok.safetensors", kohya_lora_sd15(), modelspec_header("stable-diffusion-v1/lora", "<ok>", "Ok"))


def _add_file(path_builder, meta=None, previews=()):
    def attempt(store: RepoStore, tmp_path: Path):
        built_meta = meta(tmp_path) if callable(meta) else meta
        return store.add(path_builder(tmp_path), meta=built_meta, previews=[p(tmp_path) for p in previews])

    return attempt


def _sidecar(text: str):
    def build(tmp_path: Path) -> Path:
        path = tmp_path / "side.yaml"
        path.write_text(text)
        return path

    return build


def _garbage_png(tmp_path: Path) -> Path:
    path = tmp_path / "broken.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    return path


REFUSALS = {
    "pickle-ckpt": (_add_file(lambda t: _pickle_file(t, ".ckpt")), "safetensors"),
    "pickle-pt": (_add_file(lambda t: _pickle_file(t, ".pt")), "convert"),
    "pickle-bin": (_add_file(lambda t: _pickle_file(t, ".bin")), "pickle"),
    "truncated": (_add_file(_truncated), "truncated"),
    "corrupt-header": (_add_file(_corrupt_header), "corrupt"),
    "offsets-past-end": (_add_file(_bad_offsets), "corrupt or truncated"),
    "header-too-large": (_add_file(_huge_header), "over the 16 MiB limit"),
    "sidecar-version-not-int": (_add_file(_valid, _sidecar("version: four\n")), "version"),
    "sidecar-triggers-number": (_add_file(_valid, _sidecar("triggers: 5\n")), "triggers"),
    "sidecar-bad-date": (_add_file(_valid, _sidecar("created_at: soon\n")), "created_at"),
    "sidecar-not-mapping": (_add_file(_valid, _sidecar("- a\n- b\n")), "mapping"),
    "sidecar-bad-kind": (_add_file(_valid, {"kind": "hypernetwork"}), "kind"),
    "sidecar-id-escapes": (_add_file(_valid, {"id": "../../outside"}), "not a valid id"),
    "preview-missing": (_add_file(_valid, previews=[lambda t: t / "nope.png"]), "no such file"),
    "preview-unreadable": (_add_file(_valid, previews=[_garbage_png]), "unreadable image"),
    "entry-duplicate-id": (lambda s, t: s.add_entry(entry(id="existing")), "duplicate id"),
    "entry-file-escapes": (lambda s, t: s.add_entry(entry(file="../../etc/passwd")), "escapes the store"),
    "entry-absolute-path": (lambda s, t: s.add_entry(entry(previews=[str(_garbage_png(t))])), "escapes the store"),
    "entry-missing-required": (lambda s, t: s.add_entry({"id": "x", "triggers": ["<x>"]}), "subject_types"),
    "entry-version-bool": (lambda s, t: s.add_entry(entry(version=True)), "version"),
}


@pytest.fixture(scope="module")
def populated_store(tmp_path_factory, embedder):
    """One store shared by every refusal: each must leave it exactly as the previous one did."""
    folder = tmp_path_factory.mktemp("populated")
    store = RepoStore.open(folder / "home", embedder=embedder)
    store.add_entry(entry(id="existing"))
    store.add(write_checkpoint(folder / "kept.safetensors", kohya_lora_sd15(), KOHYA_HEADER),
              meta={"description": "kept"}, previews=[write_png(folder / "kept.png")])
    yield store, snapshot(store)
    store.close()


@pytest.mark.parametrize("attempt,reason", list(REFUSALS.values()), ids=list(REFUSALS))
def test_refusal_gives_one_line_and_changes_nothing(populated_store, tmp_path, attempt, reason):
    store, before = populated_store
    assert snapshot(store) == before
    with pytest.raises(StoreError) as refused:
        attempt(store, tmp_path)
    message = str(refused.value)
    assert reason in message and "\n" not in message
    assert snapshot(store) == before


@pytest.mark.parametrize("failure", ["chroma", "commit"])
def test_a_failure_while_committing_undoes_everything(store, tmp_path, monkeypatch, failure):
    store.add_entry(entry(id="existing"))
    before = snapshot(store)
    if failure == "chroma":
        monkeypatch.setattr(store._dense, "upsert", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("disk full")))
    else:
        from sqlmodel import Session

        monkeypatch.setattr(Session, "commit", lambda self: (_ for _ in ()).throw(RuntimeError("database is locked")))
    source = write_checkpoint(tmp_path / "new.safetensors", kohya_lora_sd15(), KOHYA_HEADER)
    with pytest.raises(StoreError, match="could not add bear-v4"):
        store.add(source, meta={"description": "never stored"}, previews=[write_png(tmp_path / "p.png")])
    monkeypatch.undo()
    assert snapshot(store) == before
    assert not any(store.home.joinpath("checkpoints").iterdir())
    assert not store.home.joinpath("previews", "bear-v4").exists()


# ---------------------------------------------------------------- catalog, search, updates


def test_entries_keep_the_contract_and_export_round_trips(store, tmp_path, embedder):
    card = store.add_entry(entry())
    assert card.created_at == datetime(2025, 4, 11, 9, 30, tzinfo=timezone.utc)
    assert card.last_used_at.tzinfo is not None and card.trigger == "<bear-v4>"
    offset = store.add_entry(entry(id="late", created_at="2025-12-24T01:00:00+02:00", category=None, subject_types=["cat"]))
    assert offset.created_at == datetime(2025, 12, 23, 23, tzinfo=timezone.utc) and offset.category == "cat"
    assert store.add_entry(entry(id="dated", created_at="2025-03-01")).created_at == datetime(2025, 3, 1, tzinfo=timezone.utc)
    assert "april spring 2025" in card.card_text() and "winter" in offset.card_text()

    exported = tmp_path / "out.jsonl"
    assert store.export_catalog(exported) == 3
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert lines[0] == {k: v for k, v in ENTRY.items()}
    other = RepoStore.open(tmp_path / "other", embedder=embedder)
    report = other.load_catalog(exported)
    assert sorted(report.added) == ["bear-v4", "dated", "late"]
    by_id = lambda s: sorted((c.to_catalog_entry() for c in s.cards()), key=lambda e: e["id"])  # noqa: E731
    assert by_id(other) == by_id(store)
    other.close()


def test_search_list_update_and_use(store):
    store.add_entry(entry())
    store.add_entry(entry(id="dog-v1", triggers=["<dog>"], subject_types=["dog", "corgi"], style_tags=["realistic"],
                          description="A corgi puppy running on a sandy beach at sunset.", environment=["beach"],
                          created_at="2025-07-01", category="dog", version=1))
    store.add_entry(entry(id="city", triggers=["<city>"], subject_types=["city"], style_tags=["anime"],
                          description="Anime night city with neon signs and rain.", environment=["street"],
                          created_at="2024-12-24", category="city", version=None))
    assert store.dense_search("a dog playing by the sea", 1)[0][0] == "dog-v1"
    everything = dict(store.dense_search("teddy bear", 10))
    pooled = store.dense_search("teddy bear", 5, ids=["dog-v1", "city", "not-in-store"])
    assert sorted(i for i, _ in pooled) == ["city", "dog-v1"]  # every allowed id, nothing else
    assert [i for i, _ in pooled] == sorted(["city", "dog-v1"], key=lambda i: -everything[i])
    assert all(score == pytest.approx(everything[i], abs=1e-5) for i, score in pooled)
    assert store.dense_search("anything", 3, ids=[]) == []
    assert store.sparse_search("anime city winter", 3)[0][0] == "city"
    assert [i for i, _ in store.sparse_search("forest", 3)] == ["bear-v4"]
    assert store.sparse_search("forest", 3, ids=["dog-v1"]) == []

    assert [c.id for c in store.list(style="REALISTIC")] == ["dog-v1"]
    assert [c.id for c in store.list(category="bear")] == ["bear-v4"]
    assert [c.id for c in store.list(created_from=date(2025, 1, 1))] == ["bear-v4", "dog-v1"]
    assert [c.id for c in store.list(created_to=date(2024, 12, 24))] == ["city"]
    assert [c.id for c in store.list(text="sunset")] == ["dog-v1"]
    assert [c.id for c in store.list(text="<city>")] == ["city"]

    revision = store.revision
    updated = store.update("dog-v1", description="A gray cat asleep on a windowsill.", style_tags=["watercolor"])
    assert store.revision > revision and updated.style_tags == ["watercolor"] and updated.updated_at > updated.added_at
    assert store.dense_search("a sleeping cat by the window", 1)[0][0] == "dog-v1"
    assert store.sparse_search("watercolor", 3)[0][0] == "dog-v1" and store.sparse_search("realistic", 3) == []
    with pytest.raises(StoreError, match="version"):
        store.update("dog-v1", version="two")
    with pytest.raises(StoreError, match="only context-tuple fields"):
        store.update("dog-v1", sha256="x")
    assert store.get("dog-v1") == updated

    moment = datetime(2025, 8, 1, 12, tzinfo=timezone.utc)
    store.mark_used("city", moment)
    assert store.get("city").last_used_at == moment
    with pytest.raises(KeyError):
        store.get("missing")


def test_database_url_and_home_come_from_the_environment(personalq_home, tmp_path, monkeypatch, embedder):
    database = tmp_path / "elsewhere.db"
    monkeypatch.setenv("PERSONALQ_DATABASE_URL", f"sqlite:///{database}")
    store = RepoStore.open(embedder=embedder)
    store.add_entry(entry())
    assert store.home == personalq_home and database.is_file() and not (personalq_home / "catalog.db").exists()
    store.close()


# ---------------------------------------------------------------- repair after a crash


def test_opening_repairs_an_index_that_disagrees_with_the_catalog(store, embedder):
    for n, colour in enumerate(["red", "green", "blue", "yellow"]):
        store.add_entry(entry(id=f"bear-{n}", description=f"A {colour} plush bear number {n}"))
    home = store.home
    good = store._dense.entries()
    vectors = store._dense._collection.get(ids=["bear-2"], include=["embeddings"])["embeddings"]
    # A crash between the catalog and Chroma, in every way it can disagree:
    store._dense.delete(["bear-0", "bear-1"])  # catalog rows without vectors
    store._dense.upsert(["bear-3"], np.asarray(vectors), [{"embedder": embedder.name, "text_sha256": "stale"}])  # wrong vector
    store._dense.upsert(["ghost"], np.asarray(vectors), [{"embedder": embedder.name, "text_sha256": "x"}])  # vector without row
    store.close()

    reopened = RepoStore.open(home, embedder=embedder)
    assert reopened._dense.entries() == good
    assert reopened.dense_search("a yellow plush bear", 1)[0][0] == "bear-3"
    assert reopened.repair() == {"added": 0, "removed": 0, "recreated": 0}
    reopened.close()


@pytest.mark.parametrize("damage", ["deleted", "garbage"])
def test_opening_rebuilds_a_destroyed_chroma_folder(store, embedder, damage):
    import shutil

    for n in range(3):
        store.add_entry(entry(id=f"bear-{n}", description=f"plush bear number {n}"))
    good = store._dense.entries()
    home = store.home
    store.close()
    if damage == "deleted":
        shutil.rmtree(home / "chroma")
    else:
        for path in (home / "chroma").rglob("*"):
            if path.is_file():
                path.write_bytes(b"garbage" * 10)
    reopened = RepoStore.open(home, embedder=embedder)
    assert reopened._dense.entries() == good
    assert reopened.dense_search("plush bear number 2", 1)[0][0] == "bear-2"
    reopened.close()


def test_a_chroma_folder_another_process_holds_for_a_moment_is_waited_for_not_rebuilt(store, embedder, monkeypatch):
    """Chroma answers "pool timed out" while another process holds its database (seen when two
    processes open one store at once); that folder is busy, not broken, and is never started afresh."""
    from chromadb.errors import InternalError

    from personalq.store import indexes

    store.add_entry(entry(id="bear-1", description="plush bear"))
    home = store.home
    store.close()
    calls, connect = [], indexes.DenseIndex._connect

    def busy_twice(self):
        calls.append(1)
        if len(calls) <= 2:
            raise InternalError("pool timed out while waiting for an open connection")
        connect(self)

    monkeypatch.setattr(indexes.DenseIndex, "_connect", busy_twice)
    monkeypatch.setattr(indexes, "BUSY_RETRY_PAUSES_S", (0.01, 0.01, 0.01))
    reopened = RepoStore.open(home, embedder=embedder)
    assert len(calls) == 3 and not reopened._dense.recreated
    assert reopened.dense_search("plush bear", 1)[0][0] == "bear-1"
    reopened.close()


# ---------------------------------------------------------------- scale


def test_a_1000_entry_catalog_loads_in_batches(store, tmp_path):
    entries = synthetic_catalog(1000, seed=3)
    catalog = tmp_path / "catalog.jsonl"
    catalog.write_text("".join(json.dumps(e) + "\n" for e in entries) + "{broken\n" + json.dumps(entries[5]) + "\n")

    report = store.load_catalog(catalog)
    assert len(report.added) == 1000 and report.refused == [("catalog.jsonl:1001", "entry: not valid JSON (Expecting property name enclosed in double quotes)")]
    assert report.skipped == [("catalog.jsonl:1002", f"{entries[5]['id']!r} appears earlier in this file with the same content")]
    assert len(store) == 1000 and len(store._dense.entries()) == 1000
    cards = {c.id: c for c in store.cards()}
    stored = cards[entries[500]["id"]].to_catalog_entry()
    assert {key: stored[key] for key in entries[500]} == entries[500]
    target = entries[777]
    assert store.dense_search(target["description"], 1)[0][0] == target["id"]
    assert store.sparse_search(f"{target['triggers'][0]} {target['description']}", 1)[0][0] == target["id"]
    assert len(store.list(category="dog")) == sum(e["category"] == "dog" for e in entries)

    again = store.load_catalog(catalog)
    assert again.added == [] and len(again.skipped) == 1001


def test_hybrid_search_ranks_ties_alike_whatever_order_the_allowed_ids_come_in(store):
    """Check-in passes the ids that fit as a set, whose order changes from one process to the next;
    three identical cards tie in BM25 (whose stable sort keeps the order it is given), so only a
    fixed order keeps the question's options in the same order run after run."""
    from personalq.checkin.retrieval import hybrid_search

    for card_id in ("lamp-c", "lamp-a", "lamp-b"):
        store.add_entry(entry(id=card_id, triggers=[f"<{card_id}>"], subject_types=["lamp"], description="A brass lamp.",
                              category="lamp", version=None))
    for card_id in ("kite-1", "kite-2", "kite-3", "kite-4"):  # so that BM25 weighs "brass" and "lamp" above nothing
        store.add_entry(entry(id=card_id, triggers=[f"<{card_id}>"], subject_types=["kite"], description="A red kite over a meadow.",
                              category="kite", version=None))
    orders = [["lamp-a", "lamp-b", "lamp-c"], ["lamp-c", "lamp-b", "lamp-a"], ["lamp-b", "lamp-c", "lamp-a"]]
    rankings = {tuple(i for i, _ in hybrid_search(store, "brass lamp", 3, ids=order)) for order in orders}
    assert len(rankings) == 1, rankings
