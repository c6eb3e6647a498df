"""One browser session's side of the conversation: what Check-in asked, what was chosen, what was drawn.

The app keeps one `ChatSession` per Gradio session hash (a browser tab, or one `gradio_client.Client`),
so two people chatting at once never see each other's clarification, images or "last prompt".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: Check-in and the store load heavy indexes
    from personalq.checkin.checkin import CheckInResult, Conversation
    from personalq.service.rendering import Rendered
    from personalq.serving.queue import RequestHandle
    from personalq.store.card import CheckpointCard

MAX_KEPT_RENDERS = 24
"""Images a session keeps on screen; older ones drop off (their PNG files stay in the output folder)."""


@dataclass(frozen=True)
class OptionCard:
    """A clarification option as the user sees it: its words and a preview of a checkpoint it leads to."""

    label: str
    preview: Path | None
    checkpoint_ids: list[str]
    summary: str = ""  # "bear-v2 · v2 · realistic · 2025-04-11" for one checkpoint, "2 checkpoints" for more


@dataclass(frozen=True)
class ChatReply:
    """Check-in's answer to one turn, with the cards it names already looked up in the store.

    `message` is the one line the chat shows: why this checkpoint, the question, or what nothing satisfied.
    """

    action: str  # "select" | "clarify" | "no_match"
    message: str
    card: CheckpointCard | None = None  # the selected checkpoint
    prompt: str | None = None  # the request with the canonical trigger in place of the subject
    options: list[OptionCard] = field(default_factory=list)
    nearest: list[CheckpointCard] = field(default_factory=list)  # offered after a no match

    def to_dict(self) -> dict:
        """JSON for API clients: ids and words, no paths into the server's disk."""
        return {
            "action": self.action,
            "message": self.message,
            "checkpoint_id": self.card.id if self.card is not None else None,
            "trigger": self.card.trigger if self.card is not None else None,
            "prompt": self.prompt,
            "options": [{"label": o.label, "checkpoint_ids": list(o.checkpoint_ids)} for o in self.options],
            "nearest": [c.id for c in self.nearest],
        }


@dataclass
class ChatSession:
    """Per-session state between turns.

    `conversation` is the Check-in conversation while a question is open, `pending` its last result
    (whose options a click answers); `selected` and `prompt` are what a bit-width change re-renders.
    `renders` are the session's images, newest last, kept here rather than in the page so that a
    render finishing while another runs never overwrites it; `running` are the serving requests a
    Cancel stops.
    """

    conversation: Conversation | None = None
    pending: CheckInResult | None = None
    selected: CheckpointCard | None = None
    prompt: str | None = None
    unmatched: tuple[str, str | None] | None = None  # a request nothing fitted, and its subject words
    renders: list[Rendered] = field(default_factory=list)  # newest last
    running: set[RequestHandle] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def awaiting_answer(self) -> bool:
        return self.conversation is not None and self.pending is not None

    def keep(self, rendered: Rendered) -> None:
        with self.lock:
            self.renders = [*self.renders, rendered][-MAX_KEPT_RENDERS:]

    def cancel_all(self) -> int:
        """Cancel every request this session has queued or running; returns how many."""
        with self.lock:
            handles, self.running = list(self.running), set()
        for handle in handles:
            handle.cancel()
        return len(handles)
