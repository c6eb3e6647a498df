"""User text reaches the page as text (issue 21 item 10): no tag, remote image, link or script.

Each Markdown pane the app fills is rendered here by markdown-it with raw HTML on (as
permissive as can be), so anything that could become an element shows up.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest
from markdown_it import MarkdownIt

from app import render
from personalq.service import ChatReply

HOSTILE = ("![](http://evil.example/pixel.png) <img src=http://evil.example/a.png> <script>alert(1)</script> "
           "[click](http://evil.example/) <iframe src=//evil.example> *bold* `code` | a | b |\n# heading")


def _card(**changes):
    from personalq.store.card import CheckpointCard

    now = datetime(2025, 4, 1, tzinfo=timezone.utc)
    card = CheckpointCard(id="dog-v1", triggers=["<dog-v1>"], subject_types=["dog"], style_tags=["watercolor"],
                          description="A small dog.", created_at=now, version=1, environment=[], last_used_at=None,
                          category="dog", base_model="sd15", kind="lora", file_path=None, sha256=None, size_bytes=None,
                          previews=[], raw_metadata={}, added_at=now, updated_at=now)
    return dataclasses.replace(card, **changes)


def _html(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


HOSTILE_CARD = _card(description=HOSTILE, triggers=[f"<x>{HOSTILE}"], style_tags=[HOSTILE], category=HOSTILE,
                     subject_types=[HOSTILE], environment=[HOSTILE])
PANES = {
    "detail": lambda: render.detail_markdown(HOSTILE_CARD),
    "timeline": lambda: render.timeline_markdown(HOSTILE_CARD, [HOSTILE_CARD]),
    "select": lambda: render.reply_markdown(ChatReply(action="select", message=HOSTILE, card=HOSTILE_CARD, prompt="p")),
    "clarify": lambda: render.reply_markdown(ChatReply(action="clarify", message=HOSTILE, card=None, prompt=None)),
    "no match": lambda: render.reply_markdown(ChatReply(action="no_match", message=HOSTILE, card=None, prompt=None,
                                                        nearest=[HOSTILE_CARD])),
}


@pytest.mark.parametrize("pane", PANES)
def test_hostile_user_text_renders_as_inert_text(pane):
    html = _html(PANES[pane]())
    for element in ("<img", "<script", "<iframe", "<a ", "<h1", "<em>bold", "<code>code"):
        assert element not in html, (element, html)
    assert "evil.example" in html  # the text is still there, shown literally


def test_the_text_reads_back_exactly_as_written():
    html = _html(render.detail_markdown(_card(description="a_b *c* <d> 2025-04-01 ![x](y)")))
    assert "<p>a_b *c* &lt;d&gt; 2025-04-01 ![x](y)</p>" in html


def test_previews_reach_gradio_only_as_decoded_bounded_pixels(tmp_path):
    """HTML or a pixel bomb stored as a preview becomes the plain tile; a real image is re-decoded and bounded."""
    from PIL import Image, PngImagePlugin

    html = tmp_path / "0.png"
    html.write_bytes(b"<html><script>alert(1)</script></html>")
    bomb = tmp_path / "1.png"
    Image.new("1", (20000, 20000)).save(bomb)  # a few KiB on disk, 400 megapixels decoded
    big = tmp_path / "2.png"
    info = PngImagePlugin.PngInfo()
    info.add_text("comment", "<script>alert(1)</script>")
    Image.new("RGB", (2000, 1000), "#b45309").save(big, pnginfo=info)

    assert render.preview_image(html) is render.no_preview()
    assert render.preview_image(bomb) is render.no_preview()
    assert render.preview_image(tmp_path / "missing.png") is render.no_preview()
    shown = render.preview_image(big)
    assert max(shown.size) == render.PREVIEW_MAX_SIDE and shown.getpixel((10, 10)) == (0xb4, 0x53, 0x09)
    assert "comment" not in shown.info
