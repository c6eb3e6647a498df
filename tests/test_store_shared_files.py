"""Issue 27: checkpoint files and previews by content hash in a place every node shares (`PERSONALQ_FILES_URL`).

Nodes are `RepoStore`s with their own homes on one catalog (a SQLite file here: the same thing as
PostgreSQL for what is tested, and fast; tests/test_cluster_postgres.py does it on PostgreSQL) and one
file place: a folder (which holds the write lock) or `memory://`, fsspec's in-process filesystem, which
stands for any remote URL (no lock; a grace period instead; local copies under each home).
"""

from __future__ import annotations

import copy
import hashlib
import multiprocessing
import uuid
from pathlib import Path

import pytest

from personalq.store import RepoStore, StoreError
from personalq.store import shared_files
from tests.test_store import kohya_lora_sd15, modelspec_header, write_checkpoint, write_png
from tests.test_store_crash import HashEmbedder

FORK = multiprocessing.get_context("fork")
BLOB = "sha256/{0}/{1}.{2}"


def blob_of(data: bytes, suffix: str) -> str:
    digest = hashlib.sha256(data).hexdigest()
    return BLOB.format(digest[:2], digest, suffix)


def node(tmp_path: Path, name: str, place: str, **kwargs) -> RepoStore:
    """One node: its own home, the shared catalog and the shared file place."""
    return RepoStore.open(tmp_path / name, database_url=f"sqlite:///{tmp_path / 'catalog.db'}", embedder=HashEmbedder(),
                          files_url=place, **kwargs)


def lora(folder: Path, name: str, colour: str = "red") -> Path:
    """A LoRA (random weights: each call's bytes differ) with a sidecar and one preview beside it."""
    path = write_checkpoint(folder / f"{name}.safetensors", kohya_lora_sd15(), modelspec_header("stable-diffusion-v1/lora", f"<{name}>", name))
    (folder / f"{name}.yaml").write_text(f"id: {name}\ndescription: checkpoint {name}\n")
    write_png(folder / f"{name}.png", colour)
    return path


def add(store: RepoStore, path: Path, id_: str | None = None):
    meta = path.with_suffix(".yaml") if id_ is None else {"id": id_, "description": f"from {path.name}"}
    return store.add(path, meta=meta, previews=[path.with_suffix(".png")])


def folder_snapshot(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.rglob("*") if p.is_file() and p.name != ".write.lock"}


@pytest.fixture(params=["folder", "memory"])
def place(request, tmp_path):
    """The shared place as a URL, and a function listing what it holds ({address: sha256 of the bytes})."""
    if request.param == "folder":
        folder = tmp_path / "shared"
        yield str(folder), lambda: folder_snapshot(folder) if folder.is_dir() else {}
        return
    import fsspec

    fs, root = fsspec.filesystem("memory"), f"/pq-{uuid.uuid4().hex}"

    def listing() -> dict[str, str]:
        found = fs.find(root) if fs.exists(root) else []
        return {name[len(root) + 1:]: hashlib.sha256(fs.cat_file(name)).hexdigest() for name in found}

    yield f"memory://{root}", listing
    if fs.exists(root):
        fs.rm(root, recursive=True)


def test_two_homes_on_one_catalog_and_one_place_keep_and_read_each_others_checkpoints(tmp_path, place):
    url, listing = place
    source = lora(tmp_path / "in", "bear-v1")
    with node(tmp_path, "node1", url) as one:
        add(one, source)
        card = one.get("bear-v1")  # a remote place's files come to this node on `get`, the renderer's call
        stored = {blob_of(source.read_bytes(), "safetensors"), blob_of(card.previews[0].read_bytes(), "png")}
    assert set(listing()) == stored, "content-addressed, once each"
    assert not (tmp_path / "node1" / "checkpoints").exists() and not (tmp_path / "node1" / "previews").exists()
    with node(tmp_path, "node2", url) as two:  # opening repairs: it must not drop node1's rows
        assert [c.id for c in two.cards()] == ["bear-v1"] and two.check_files().ok
        seen = two.get("bear-v1")
        assert seen.file_path.read_bytes() == source.read_bytes() and seen.previews[0].is_file()
        assert seen.file_path.is_relative_to(two.files_root) and seen.sha256 == hashlib.sha256(source.read_bytes()).hexdigest()
        assert two.update("bear-v1", style_tags=["cartoon"]).file_path == seen.file_path
    with node(tmp_path, "node1", url) as one:
        assert [c.id for c in one.cards()] == ["bear-v1"]


def test_remove_takes_the_blobs_no_other_row_names_and_identical_previews_are_stored_once(tmp_path, place, monkeypatch):
    url, listing = place
    monkeypatch.setattr(shared_files, "ORPHAN_GRACE_S", 0.0)  # a remote place deletes only what is older than this
    with node(tmp_path, "node1", url) as one, node(tmp_path, "node2", url) as two:
        add(one, lora(tmp_path / "in", "cat-v1", "green"))
        add(two, lora(tmp_path / "in", "cat-v2", "green"))  # same picture: one preview blob, two rows
        first, second = one.get("cat-v1"), two.get("cat-v2")
        preview = blob_of(first.previews[0].read_bytes(), "png")
        assert first.previews[0].name == second.previews[0].name == preview.rsplit("/", 1)[1]
        assert len(listing()) == 3
        one.remove("cat-v1")
        assert set(listing()) == {preview, blob_of(second.file_path.read_bytes(), "safetensors")}, "the shared preview stays"
        assert two.get("cat-v2").previews[0].is_file() and two.check_files().ok
        two.remove("cat-v2")
        assert listing() == {} and len(one) == 0


def test_a_refused_or_failed_add_leaves_the_shared_place_byte_identical(tmp_path, place, monkeypatch):
    url, listing = place
    with node(tmp_path, "node1", url) as one:
        add(one, lora(tmp_path / "in", "dog-v1", "blue"))
        before = listing()
        with pytest.raises(StoreError, match="duplicate id"):
            add(one, lora(tmp_path / "again", "dog-v1"))
        broken = lora(tmp_path / "in", "dog-v2")
        broken.with_suffix(".png").write_bytes(b"\x89PNG\r\n\x1a\n not an image")
        with pytest.raises(StoreError, match="unreadable image"):
            add(one, broken)

        def fail(texts):
            raise RuntimeError("embedder down")

        one._embedder.embed = fail  # fails after the files are written: they must be taken back
        other = lora(tmp_path / "in", "dog-v3", "blue")  # its preview is dog-v1's picture: that blob must stay
        with pytest.raises(StoreError, match="embedder down"):
            add(one, other)
        assert [c.id for c in one.cards()] == ["dog-v1"]
        if url.startswith("memory://"):  # no lock: its file may be another node's add of the same bytes; it waits out the grace period
            assert set(listing()) == {*before, blob_of(other.read_bytes(), "safetensors")}
            monkeypatch.setattr(shared_files, "ORPHAN_GRACE_S", 0.0)
            node(tmp_path, "node2", url).close()
        assert listing() == before


def _add_same_id(home: str, url: str, catalog_url: str, source: str, barrier, results) -> None:
    """Validate first, wait for the other node to have validated too, then commit: the race the issue names."""
    try:
        store = RepoStore.open(Path(home), database_url=catalog_url, embedder=HashEmbedder(), files_url=url)
        prepared = store._prepare_file(Path(source), {"id": "same-id", "description": f"from {Path(source).name}"},
                                       [Path(source).with_suffix(".png")])
        barrier.wait(60)
        store._commit([prepared])
        results.put(("added", source))
    except StoreError as error:
        results.put((f"refused: {error}", source))


def test_two_nodes_adding_one_id_at_once_one_wins_the_other_is_refused_in_one_line_without_files(tmp_path):
    url, catalog_url = str(tmp_path / "shared"), f"sqlite:///{tmp_path / 'catalog.db'}"
    node(tmp_path, "node1", url).close()  # the catalog's tables exist before two processes race to make them
    sources = [lora(tmp_path / "in", name, colour) for name, colour in (("a", "red"), ("b", "blue"))]
    barrier, results = FORK.Barrier(2), FORK.Queue()
    runners = [FORK.Process(target=_add_same_id, args=(str(tmp_path / f"node{i}"), url, catalog_url, str(s), barrier, results))
               for i, s in enumerate(sources, 1)]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join(120)
    outcomes = sorted(results.get(timeout=5) for _ in runners)
    assert [o.split(":")[0] for o, _ in outcomes] == ["added", "refused"], outcomes
    refusal = outcomes[1][0]
    assert "\n" not in refusal and "same-id" in refusal
    winner = Path(outcomes[0][1])
    with node(tmp_path, "node3", url) as third:
        card = third.get("same-id")
        assert card.file_path.read_bytes() == winner.read_bytes() and third.check_files().ok
        expected = {blob_of(winner.read_bytes(), "safetensors"), blob_of(card.previews[0].read_bytes(), "png")}
    assert set(folder_snapshot(tmp_path / "shared")) == expected, "the loser left no file in the shared place"
    assert not any((tmp_path / f"node{i}" / "checkpoints").exists() for i in (1, 2))


def test_repair_on_open_removes_orphans_in_a_folder_at_once_and_on_a_remote_place_only_after_the_grace_period(tmp_path, place, monkeypatch):
    url, listing = place
    with node(tmp_path, "node1", url) as one:
        add(one, lora(tmp_path / "in", "owl-v1"))
    kept = listing()
    stray = blob_of(b"left by a crash", "png")
    half = "sha256/ab/.tmp-0123-half.safetensors"
    quantized = "sha256/cd/" + "c" * 64 + ".safetensors.quantized/INT8/unet.safetensors"  # serving's, not the store's
    if url.startswith("memory://"):
        import fsspec

        fs, root = fsspec.filesystem("memory"), url.removeprefix("memory://")
        for name, data in ((stray, b"left by a crash"), (half, b"half"), (quantized, b"q")):
            fs.pipe(f"{root}/{name}", data)
        node(tmp_path, "node2", url).close()
        assert set(listing()) == {*kept, stray, half, quantized}, "young files may be another node's add in progress"
        monkeypatch.setattr(shared_files, "ORPHAN_GRACE_S", 0.0)
    else:
        for name, data in ((stray, b"left by a crash"), (half, b"half"), (quantized, b"q")):
            (Path(url) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(url) / name).write_bytes(data)
    with node(tmp_path, "node2", url) as two:
        assert set(listing()) == {*kept, quantized} and [c.id for c in two.cards()] == ["owl-v1"]


def test_a_node_without_the_shared_place_on_the_shared_catalog_drops_nothing(tmp_path):
    url = str(tmp_path / "shared")
    with node(tmp_path, "node1", url) as one:
        add(one, lora(tmp_path / "in", "fox-v1"))
    with RepoStore.open(tmp_path / "misconfigured", database_url=f"sqlite:///{tmp_path / 'catalog.db'}", embedder=HashEmbedder()) as other:
        assert [c.id for c in other.cards()] == ["fox-v1"]  # its home layout judges only the files it writes
    with node(tmp_path, "node1", url) as one:
        assert one.get("fox-v1").file_path.is_file()


def test_a_catalog_entry_may_name_only_blobs_already_in_the_place(tmp_path, place):
    url, listing = place
    with node(tmp_path, "node1", url) as one:
        card = add(one, lora(tmp_path / "in", "elk-v1"))
        exported = tmp_path / "catalog.jsonl"
        one.export_catalog(exported)
        one.remove("elk-v1")
        entry = {"id": "elk-v2", "triggers": ["<elk>"], "subject_types": ["elk"], "description": "an elk", "created_at": "2025-01-01"}
        for value in ("../catalog.db", "/etc/passwd", "sha256/00/" + "1" * 64 + ".safetensors", "checkpoints/elk-v1.safetensors"):
            with pytest.raises(StoreError):
                one.add_entry({**entry, "file": value})
        with pytest.raises(StoreError, match="not a checkpoint address"):
            one.add_entry({**entry, "file": card.previews[0].relative_to(one.files_root).as_posix()})
        assert "sha256/" in exported.read_text() and str(tmp_path) not in exported.read_text()


# ---------------------------------------------------------------- removing while another node renders


class PipeShapes:
    """Upload validation against the tiny pipeline the renderer runs (a `BaseShapes`)."""

    name = "sd15"

    def __init__(self, pipe):
        self.pipe = pipe

    def unet_shapes(self):
        return {k: tuple(v.shape) for k, v in self.pipe.unet.state_dict().items()}

    def unet_config(self):
        return dict(self.pipe.unet.config)

    def text_widths(self):
        return {"text_encoder": self.pipe.text_encoder.get_input_embeddings().weight.shape[1]}


@pytest.fixture(scope="module")
def tiny():
    from personalq.eval.serve_bench import write_random_loras
    from personalq.random_pipelines import tiny_sd15_pipeline

    pipe = tiny_sd15_pipeline(0)
    return pipe, write_random_loras(copy.deepcopy(pipe), Path(__import__("tempfile").mkdtemp(prefix="pq-loras-")), 1, "sd15")


@pytest.mark.parametrize("when", ["loading", "denoising", "before"])
def test_a_checkpoint_removed_while_another_node_renders_it_completes_or_is_refused_in_one_line(tmp_path, tiny, when):
    from personalq.serving import GenerationRequest, PipelineManager, ServingConfig, ServingError

    pipe, loras = tiny
    path, trigger = loras[0]
    url = str(tmp_path / "shared")
    a = node(tmp_path, "node-a", url, bases={"sd15": PipeShapes(pipe)})
    b = node(tmp_path, "node-b", url, bases={"sd15": PipeShapes(pipe)})
    a.add(path, meta={"id": "subject-v1", "description": "a subject", "subject_types": ["subject"]})
    renderer = PipelineManager.from_pipeline(copy.deepcopy(pipe), "sd15", ServingConfig(), store=b)
    removed = []

    def remove_at(done, total, stage):
        if not removed and stage.startswith("attaching" if when == "loading" else "denoising"):
            a.remove("subject-v1")
            removed.append(stage)

    if when == "before":
        a.remove("subject-v1")
    request = GenerationRequest(f"a photo of {trigger}", checkpoint_id="subject-v1", steps=2, seed=3)
    if when == "denoising":  # the weights were loaded before the file went: the image comes
        assert renderer.generate(request, progress=remove_at).image is not None and removed
    else:
        with pytest.raises(ServingError) as refused:
            renderer.generate(request, progress=remove_at)
        message = str(refused.value)
        assert "\n" not in message and "broken" not in message, message
        assert ("was removed" if when == "loading" else "not in the store") in message
    assert b.broken() == {} and len(b) == 0 and len(a) == 0
    assert a.check_files().ok and b.check_files().ok and folder_snapshot(tmp_path / "shared") == {}
    a.close()
    b.close()


def test_a_node_copies_a_remote_file_only_when_its_bytes_match_the_hash_in_its_name(tmp_path):
    import fsspec

    fs, root = fsspec.filesystem("memory"), f"/pq-{uuid.uuid4().hex}"
    try:
        with node(tmp_path, "node1", f"memory://{root}") as one:
            add(one, lora(tmp_path / "in", "ant-v1"))
            address = one._card("ant-v1").file_path.relative_to(one.files_root).as_posix()
        fs.pipe(f"{root}/{address}", b"changed by hand")
        with node(tmp_path, "node2", f"memory://{root}") as two:
            card = two.get("ant-v1")  # no exception: the renderer then refuses a missing file in one line
            assert not card.file_path.exists() and card.previews[0].is_file()
    finally:
        fs.rm(root, recursive=True)
