"""How library objects look on screen: Markdown and gallery items, no decisions.

Images reach the browser only as pixels: a stored preview is decoded (PNG, JPEG or WebP, within the
store's pixel limit) and handed to Gradio as a PIL image, which Gradio re-encodes into its own cache
and serves as an image. No file of the data directory is ever given to Gradio by path, so the app
needs no `allowed_paths` and nothing a stranger uploaded reaches a visitor as anything but an image.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path

from personalq.service import ChatReply, Progress

THUMB = 256
PREVIEW_MAX_SIDE = 512


@functools.lru_cache(maxsize=1)
def no_preview():
    """A plain tile for checkpoints that came without preview images."""
    from PIL import Image, ImageDraw

    tile = Image.new("RGB", (THUMB, THUMB), "#e5e7eb")
    ImageDraw.Draw(tile).text((THUMB // 2 - 30, THUMB // 2 - 6), "no preview", fill="#6b7280")
    return tile


def preview_image(path: Path):
    """A stored preview as a decoded PIL image (metadata stripped), or the plain tile if it does not decode."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError:
        return no_preview()
    return _decoded(str(path), stat.st_mtime_ns, stat.st_size) or no_preview()


@functools.lru_cache(maxsize=512)
def _decoded(path: str, mtime_ns: int, size: int):
    """Keyed by modification time and size too, so a replaced file is decoded again."""
    from PIL import Image

    from personalq.store.errors import ImageRefused
    from personalq.store.images import clean_image_file

    try:
        clean = clean_image_file(Path(path))
    except ImageRefused:
        return None
    image = Image.open(io.BytesIO(clean.data))
    image.thumbnail((PREVIEW_MAX_SIDE, PREVIEW_MAX_SIDE))  # bounds what the cache holds: 512 entries of at most 1 MiB
    return image


def thumbnail(card):
    return preview_image(card.previews[0]) if card.previews else no_preview()


def preview_images(card) -> list:
    return [preview_image(p) for p in card.previews]


_MARKDOWN_PUNCTUATION = frozenset("\\`*_{}[]()#+-.!|~>:")
_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def literal(text) -> str:
    """User text for a Markdown pane, shown exactly as written: never a tag, link, image or emphasis.

    Descriptions, tags and triggers come from strangers' files; as Markdown they could make every
    visitor's browser fetch a remote image or run raw HTML. Each Markdown punctuation character is
    backslash-escaped and each HTML special character becomes an entity, so the text is inert.
    (`nh3` cleans HTML but leaves Markdown's own `![](url)` images alone, hence this instead.)
    """
    return "".join(_HTML_ENTITIES.get(ch) or (f"\\{ch}" if ch in _MARKDOWN_PUNCTUATION else ch) for ch in str(text))


def _cell(text) -> str:
    """`literal` on one line, for a table cell."""
    return literal(" ".join(str(text).split()))


def day(moment) -> str:
    return moment.date().isoformat() if moment is not None else "never"


def card_line(card) -> str:
    """name · trigger · version · created date · style tags, all user text literal."""
    parts = [f"**{literal(card.id)}**", literal(card.trigger)]
    if card.version is not None:
        parts.append(f"v{card.version}")
    parts.append(f"created {day(card.created_at)}")
    if card.style_tags:
        parts.append(literal(", ".join(card.style_tags)))
    return " · ".join(parts)


def caption(card, broken: str | None = None) -> str:
    """Gallery caption (plain text): id, trigger, version, style, date; a checkpoint marked broken says so."""
    version = f" · v{card.version}" if card.version is not None else ""
    style = f" · {card.style_tags[0]}" if card.style_tags else ""
    return f"{card.id} · {card.trigger}{version}{style} · {day(card.created_at)}" + (" · BROKEN" if broken else "")


def reply_markdown(reply: ChatReply) -> str:
    if reply.action == "select":
        return f"{card_line(reply.card)}\n\n_{literal(reply.message)}_"
    if reply.action == "clarify":
        return f"{literal(reply.message)}\n\nClick a card below or type your answer."
    lines = [f"Nothing in your repository fits: {literal(reply.message)}"]
    if reply.nearest:
        lines.append("The nearest I have (click one below to use it):")
        lines += [f"- {card_line(card)}" for card in reply.nearest]
    return "\n".join(lines)


def chat_placeholder(examples: list[str]) -> str:
    example = f", e.g. *{literal(examples[0])}*" if examples else ""
    return (f"**Ask for one of your checkpoints in your own words**{example}. I ask when more than one fits. "
            "Then press **Compare bit-widths** to see what quantization does to it, side by side.")


def option_items(reply: ChatReply) -> list:
    """Option cards: the preview, then the option's words and what the checkpoint behind it is."""
    return [(preview_image(o.preview) if o.preview else no_preview(), f"{o.label} — {o.summary}" if o.summary else o.label)
            for o in reply.options]


def nearest_items(reply: ChatReply) -> list:
    return [(thumbnail(card), caption(card)) for card in reply.nearest]


def render_items(renders) -> list:
    """A session's images, newest first, as the lossless PNG files (parameters inside) with their labels."""
    return [(str(r.path), r.label) for r in reversed(renders)]


def comparison_items(comparison) -> list:
    """Two rows: the variants side by side, full precision first; under each quantized one, its difference."""
    reference = (reference_tile(), f"{comparison.variants[0].setting_label} is the reference")
    return ([(str(v.path), v.label) for v in comparison.variants]
            + [reference] + [(d.image, d.label) for d in comparison.differences])


@functools.lru_cache(maxsize=1)
def reference_tile():
    """The blank tile under the full-precision image, so each difference sits under its own variant."""
    from PIL import Image

    return Image.new("RGB", (THUMB, THUMB), "#f3f4f6")


def progress_text(event: Progress) -> str:
    what = (event.message or "working").capitalize()
    if event.total and event.step > 0:
        return f"*{literal(what)}: step {event.step} of {event.total}*"
    return f"*{literal(what)}…*"


def detail_markdown(card, broken: str | None = None) -> str:
    """The card's fields; a checkpoint marked broken shows why, above everything else."""
    warning = f"**Broken:** {literal(broken)} (not rendered until a fixed file is added again)\n\n" if broken else ""
    rows = [
        ("id", card.id),
        ("triggers", ", ".join(card.triggers)),
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
        ("sha256", f"{card.sha256[:16]}…" if card.sha256 else "—"),
        ("added", card.added_at.isoformat()),
    ]
    table = "\n".join(f"| {name} | {_cell(value)} |" for name, value in rows)
    return f"### {literal(card.id)}\n\n{warning}{literal(card.description)}\n\n| field | value |\n|---|---|\n{table}"


def timeline_markdown(card, versions) -> str:
    lines = [f"**Versions of {literal(card.category)}** (oldest first)"]
    for other in versions:
        mark = "**this one**" if other.id == card.id else ""
        version = f"v{other.version}" if other.version is not None else "v?"
        lines.append(f"- {day(other.created_at)} · {version} · {literal(other.id)} · {literal(other.trigger)} {mark}".rstrip())
    return "\n".join(lines)
