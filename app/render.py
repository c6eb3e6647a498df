"""How library objects look on screen: Markdown and gallery items, no decisions."""

from __future__ import annotations

import functools

from personalq.service import ChatReply, Progress

THUMB = 256


@functools.lru_cache(maxsize=1)
def no_preview():
    """A plain tile for checkpoints that came without preview images."""
    from PIL import Image, ImageDraw

    tile = Image.new("RGB", (THUMB, THUMB), "#e5e7eb")
    ImageDraw.Draw(tile).text((THUMB // 2 - 30, THUMB // 2 - 6), "no preview", fill="#6b7280")
    return tile


def thumbnail(card):
    return str(card.previews[0]) if card.previews else no_preview()


def day(moment) -> str:
    return moment.date().isoformat() if moment is not None else "never"


def card_line(card) -> str:
    """name · `trigger` · version · created date · style tags (angle brackets kept visible as code)."""
    parts = [f"**{card.id}**", f"`{card.trigger}`"]
    if card.version is not None:
        parts.append(f"v{card.version}")
    parts.append(f"created {day(card.created_at)}")
    if card.style_tags:
        parts.append(", ".join(card.style_tags))
    return " · ".join(parts)


def caption(card) -> str:
    version = f" · v{card.version}" if card.version is not None else ""
    return f"{card.id} · {card.trigger}{version} · {day(card.created_at)}"


def reply_markdown(reply: ChatReply) -> str:
    if reply.action == "select":
        return f"{card_line(reply.card)}\n\n_{reply.message}_"
    if reply.action == "clarify":
        return f"{reply.message}\n\nClick a card below or type your answer."
    lines = [f"Nothing in your repository fits: {reply.message}"]
    if reply.nearest:
        lines.append("The nearest I have:")
        lines += [f"- {card_line(card)}" for card in reply.nearest]
    return "\n".join(lines)


CHAT_PLACEHOLDER = (
    "**Ask for one of your checkpoints in your own words**, e.g. *my cartoon bear at the beach, the April one*. "
    "I ask when more than one fits; add new checkpoints in the Upload tab."
)


def option_items(reply: ChatReply) -> list:
    return [(str(o.preview) if o.preview else no_preview(), o.label) for o in reply.options]


def progress_text(event: Progress) -> str:
    what = (event.message or "working").capitalize()
    if event.total and event.step > 0:
        return f"*{what}: step {event.step} of {event.total}*"
    return f"*{what}…*"


def detail_markdown(card) -> str:
    rows = [
        ("id", card.id),
        ("triggers", ", ".join(f"`{t}`" for t in card.triggers)),
        ("category", card.category),
        ("subject types", ", ".join(card.subject_types)),
        ("style tags", ", ".join(card.style_tags) or "—"),
        ("environment", ", ".join(card.environment) or "—"),
        ("version", card.version if card.version is not None else "—"),
        ("created", card.created_at.isoformat()),
        ("last used", card.last_used_at.isoformat() if card.last_used_at else "never"),
        ("kind", card.kind or "—"),
        ("base model", card.base_model or "—"),
        ("size", f"{card.size_bytes / 2**20:.2f} MiB" if card.size_bytes else "—"),
        ("sha256", f"`{card.sha256[:16]}…`" if card.sha256 else "—"),
        ("added", card.added_at.isoformat()),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return f"### {card.id}\n\n{card.description}\n\n| field | value |\n|---|---|\n{table}"


def timeline_markdown(card, versions) -> str:
    lines = [f"**Versions of {card.category}** (oldest first)"]
    for other in versions:
        mark = "**this one**" if other.id == card.id else ""
        version = f"v{other.version}" if other.version is not None else "v?"
        lines.append(f"- {day(other.created_at)} · {version} · {other.id} · `{other.trigger}` {mark}".rstrip())
    return "\n".join(lines)
