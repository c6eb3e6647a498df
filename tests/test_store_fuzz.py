"""Issue 21: a fuzz suite over everything a stranger can hand the store.

Hypothesis generates hostile safetensors headers, metadata values, tensors and file bytes (previews,
sidecars) — `FUZZ_EXAMPLES` per strategy, over 1,000 per run — and for each asserts: the add is
refused with one line (a `StoreError`, nothing else), or accepted and usable (its file and previews
read back, its card is found); on refusal every byte under the home is as it was; nothing beside the
home is touched. One store serves every example: a snapshot of its bytes is compared after each.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from personalq.store import RepoStore, StoreError
from personalq.store.metadata import MAX_STORED_METADATA_CHARS
from tests.test_store import pq_nano_lora

FUZZ_EXAMPLES = int(os.environ.get("PERSONALQ_FUZZ_EXAMPLES", "260"))
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
RAN: dict[str, int] = {}
ACCEPTED: dict[str, int] = {}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One store for every example, a sentinel folder beside its home, and a folder for the inputs."""
    from personalq.store.embedder import default_embedder

    root = tmp_path_factory.mktemp("fuzz")
    (root / "beside").mkdir()
    (root / "beside" / "sentinel.txt").write_text("must not change")
    store = RepoStore.open(root / "outer" / "home", embedder=default_embedder())
    yield store, root
    store.close()
    print(f"fuzz: {sum(RAN.values())} inputs {RAN}, accepted {ACCEPTED}")
    if len(RAN) == 4:  # the whole module ran: enough inputs, and both outcomes were exercised
        assert sum(RAN.values()) >= 1000, RAN
        assert ACCEPTED.get("metadata", 0) > 0 and ACCEPTED.get("file-bytes", 0) > 0, ACCEPTED


def tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def outside(root: Path, home: Path) -> dict[str, str]:
    return {k: v for k, v in tree(root).items() if not (root / k).is_relative_to(home) and not k.startswith("inputs/")}


def attempt(world, name: str, checkpoint: bytes, meta=None, previews: list[bytes] = ()) -> None:
    """Add one generated input and hold the store to the contract, whichever way it goes."""
    store, root = world
    RAN[name] = RAN.get(name, 0) + 1
    inputs = root / "inputs"
    inputs.mkdir(exist_ok=True)
    for old in inputs.iterdir():
        old.unlink()
    source = inputs / "upload.safetensors"
    source.write_bytes(checkpoint)
    preview_paths = []
    for n, data in enumerate(previews):
        preview_paths.append(inputs / f"p{n}.png")
        preview_paths[-1].write_bytes(data)
    if isinstance(meta, str):
        (inputs / "side.yaml").write_text(meta, encoding="utf-8", errors="surrogatepass")
        meta = inputs / "side.yaml"
    before, beside = tree(store.home), outside(root, store.home)
    try:
        card = store.add(source, meta=meta, previews=preview_paths)
    except StoreError as refused:
        message = str(refused)
        assert message and "\n" not in message and len(message) <= 600, message
        assert tree(store.home) == before, message
    else:
        ACCEPTED[name] = ACCEPTED.get(name, 0) + 1
        try:
            assert card.file_path.read_bytes() == checkpoint
            assert card.file_path.parent == store.home / "checkpoints"
            for preview in card.previews:
                assert preview.parent == store.home / "previews" / card.id
                with Image.open(preview) as image:
                    assert image.format in ("PNG", "JPEG", "WEBP")
                    image.load()
            assert len(json.dumps(card.raw_metadata)) <= MAX_STORED_METADATA_CHARS + 4096
            assert card.id in {c.id for c in store.list(text=card.id)}
        finally:
            store.remove(card.id)
    assert outside(root, store.home) == beside


def safetensors_bytes(header: dict, data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def valid_lora(metadata: dict[str, str], tensors: dict[str, np.ndarray] | None = None) -> bytes:
    from safetensors.numpy import save

    return save(tensors or pq_nano_lora(), metadata=metadata)


def png(size=(4, 4)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "green").save(out, format="PNG")
    return out.getvalue()


HOSTILE_TEXT = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["../../catalog.db", "..", "/etc/passwd", "[/x]", "[bold]x[/bold]", "a\x00b", "inf", "-inf", "nan",
                     "9999-12-31T23:59:59-05:00", "0001-01-01", "1e308", "<script>alert(1)</script>", "C:\\x", "~/.ssh",
                     "data:image/x/../../../catalog.db;base64,", "\u202e", "x" * 5000]),
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | HOSTILE_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(HOSTILE_TEXT, children, max_size=4),
    max_leaves=20,
)
KNOWN_KEYS = ["modelspec.date", "modelspec.title", "modelspec.trigger_phrase", "modelspec.tags", "modelspec.architecture",
              "modelspec.description", "modelspec.thumbnail", "ss_output_name", "ss_tag_frequency", "ss_training_started_at",
              "ss_base_model_version", "ss_network_module"]


SANE_METADATA = {"modelspec.architecture": "pq-nano/lora", "modelspec.trigger_phrase": "<t>", "modelspec.tags": "cat",
                 "modelspec.description": "fuzz"}


@st.composite
def thumbnails(draw) -> str:
    mime = draw(st.sampled_from(["image/png", "image/html", "text/html", "image/svg+xml", "image/x/../../../catalog.db", "image/jpeg"]) | HOSTILE_TEXT)
    payload = draw(st.sampled_from([png(), png((1, 1)), b"<html>x</html>", b""]) | st.binary(max_size=200))
    if draw(st.booleans()):
        payload = payload[: draw(st.integers(0, len(payload)))]  # truncated
    return f"data:{mime};base64," + base64.b64encode(payload).decode()


@st.composite
def metadata_values(draw) -> dict[str, str]:
    keys = draw(st.lists(st.sampled_from(KNOWN_KEYS) | HOSTILE_TEXT.filter(lambda k: k != "__metadata__"), min_size=1, max_size=6, unique=True))
    values = {}
    for key in keys:
        kind = draw(st.integers(0, 3))
        if key == "modelspec.thumbnail" or kind == 0 and key.endswith("thumbnail"):
            values[key] = draw(thumbnails())
        elif kind == 1:
            values[key] = json.dumps(draw(JSON_VALUES))
        elif kind == 2:
            depth = draw(st.integers(10, 3000))
            values[key] = "[" * depth + "]" * depth
        else:
            values[key] = draw(HOSTILE_TEXT)
    return values


@given(data=st.data())
@FUZZ
def test_fuzz_hostile_headers(world, data):
    """Raw header JSON and lengths: wrong types, offsets, dtypes, shapes, nesting, lying lengths."""
    tensor = st.fixed_dictionaries({
        "dtype": st.sampled_from(["F32", "F16", "BF16", "I64", "U8", "BOOL", "F64", "Q4", ""]) | HOSTILE_TEXT,
        "shape": st.lists(st.integers(-2, 2**40), max_size=4) | JSON_VALUES,
        "data_offsets": st.lists(st.integers(-1, 2**40), max_size=3) | JSON_VALUES,
    })
    header = data.draw(st.dictionaries(HOSTILE_TEXT | st.sampled_from(["__metadata__", "w"]), tensor | JSON_VALUES, max_size=4))
    body = data.draw(st.binary(max_size=64))
    raw = safetensors_bytes(header, body)
    if data.draw(st.integers(0, 4)) == 0:
        raw = struct.pack("<Q", data.draw(st.integers(0, 2**64 - 1))) + raw[8:]  # a lying length
    attempt(world, "headers", raw)


@given(metadata=metadata_values(), sidecar=st.none() | st.dictionaries(
    st.sampled_from(["id", "triggers", "subject_types", "description", "created_at", "version", "kind", "base_model", "category"]),
    JSON_VALUES, max_size=5))
@FUZZ
def test_fuzz_hostile_metadata_values(world, metadata, sidecar):
    """A loadable PQ-Nano LoRA whose ModelSpec/kohya values (and sidecar) are hostile."""
    attempt(world, "metadata", valid_lora(SANE_METADATA | metadata), meta=sidecar)


@given(data=st.data())
@FUZZ
def test_fuzz_hostile_tensors(world, data):
    """Tensor names, shapes, dtypes and values (NaN, inf, empty) against the base the header names."""
    names = st.sampled_from([
        "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.lora_A.weight",
        "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.lora_B.weight",
        "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.lora.down.weight",
        "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.lora.up.weight",
        "lora_unet_mid_block_attentions_0_proj_in.lora_down.weight", "lora_unet_mid_block_attentions_0_proj_in.alpha",
        "lora_te_text_model_encoder_layers_0_mlp_fc1.lora_up.weight", "lora_trigger_embedding.<cat>",
        "emb_params", "clip_l", "clip_g", "conv_in.weight", "model.diffusion_model.input_blocks.0.0.weight",
    ]) | st.text(min_size=1, max_size=30)
    shapes = st.lists(st.sampled_from([0, 1, 2, 3, 4, 8, 64, 128, 384, 768]), max_size=4).filter(lambda s: np.prod(s) <= 2**16)
    fill = st.sampled_from([0.0, 1.0, np.nan, np.inf, -np.inf, 1e30])
    tensors = {}
    for name in data.draw(st.lists(names, min_size=1, max_size=5, unique=True)):
        shape = tuple(data.draw(shapes))
        dtype = data.draw(st.sampled_from([np.float16, np.float32, np.int8, np.float64]))
        value = np.full(shape, data.draw(fill), dtype=np.float64).clip(-6e4, 6e4) if dtype is np.float16 else np.full(shape, data.draw(fill))
        value = value.astype(dtype) if np.issubdtype(dtype, np.floating) else np.zeros(shape, dtype)
        tensors[name] = np.ascontiguousarray(np.asarray(value))
    architecture = data.draw(st.sampled_from(["pq-nano/lora", "pq-nano/textual-inversion", "pq-nano", "stable-diffusion-v1/lora",
                                              "stable-diffusion-xl-v1-base/lora", "stable-diffusion-v1", "other/lora", ""]))
    attempt(world, "tensors", valid_lora(SANE_METADATA | {"modelspec.architecture": architecture}, tensors))


@given(data=st.data())
@FUZZ
def test_fuzz_hostile_file_bytes(world, data):
    """Preview and sidecar files: random or mutated image bytes, random YAML text, bombs."""
    def mutated(raw: bytes) -> bytes:
        raw = bytearray(raw)
        for _ in range(data.draw(st.integers(0, 4))):
            if raw:
                raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        return bytes(raw)

    def image_bytes() -> bytes:
        choice = data.draw(st.integers(0, 3))
        if choice == 0:
            return data.draw(st.binary(max_size=300))
        if choice == 1:
            return mutated(png())
        if choice == 2:
            return png()[: data.draw(st.integers(0, len(png())))]
        side = data.draw(st.integers(1, 60000))  # a header that claims side x side pixels
        head = png()
        return head[:16] + struct.pack(">II", side, side) + head[24:]

    previews = [image_bytes() for _ in range(data.draw(st.integers(0, 2)))]
    sidecar = data.draw(st.none() | st.text(max_size=200) | st.sampled_from([
        "description: " + "[" * 5000, "a: &a [x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c]\n",
        "!!python/object/apply:os.system ['touch /tmp/pwned']", "created_at: 9999-12-31T23:59:59-05:00", "id: '../../x'",
        "triggers: ['[/x]']\nsubject_types: [cat]\ndescription: ok", "\x00",
    ]))
    attempt(world, "file-bytes", valid_lora(SANE_METADATA), meta=sidecar, previews=previews)
