"""One browser session's side of the conversation: what Check-in asked, what was chosen, what was drawn.

The app keeps one `ChatSession` per Gradio session hash (a browser tab, or one `gradio_client.Client`),
so two people chatting at once never see each other's clarification or re-render each other's prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class OptionCard:
    """A clarification option as the user sees it: its words and a preview of a checkpoint it leads to."""

    label: str
    preview: Path | None
    checkpoint_ids: list[str]


@dataclass(frozen=True)
class ChatReply:
    """Check-in's answer to one turn, with the cards it names already looked up in the store.

    `message` is the one line the chat shows: why this checkpoint, the question, or what nothing satisfied.
    """

    action: str  # "select" | "clarify" | "no_match"
    message: str
    card: Any = None  # CheckpointCard of the selected checkpoint
    prompt: str | None = None  # the request with the canonical trigger in place of the subject
    options: list[OptionCard] = field(default_factory=list)
    nearest: list[Any] = field(default_factory=list)  # CheckpointCards offered after a no match

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
    """

    conversation: Any = None
    pending: Any = None
    selected: Any = None
    prompt: str | None = None

    @property
    def awaiting_answer(self) -> bool:
        return self.conversation is not None and self.pending is not None
