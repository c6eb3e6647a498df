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
