"""One error hierarchy: every refusal a user sees is a `PersonalQError`, whose message is that one line.

The CLI prints it after "error:", the app shows it beside the field at fault, an API client gets it as
the error text. Each package subclasses it for its own boundary (`StoreError`, `ServingError`,
`SettingError`, ...), so callers can catch one class or tell them apart. Subclasses that were
`ValueError`s before keep being ones, so no existing `except ValueError` changes what it catches.
"""

from __future__ import annotations

MAX_MESSAGE_CHARS = 500


def one_line(text: object, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Collapse a message to one printable line: user text inside a reason must not add lines."""
    flat = " ".join(str(text).replace("\x00", "\\0").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def first_line(error: BaseException) -> str:
    """A library's exception as one line for the user: its first message line, else its type."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


class PersonalQError(Exception):
    """A refusal with its one-line reason."""

    def __init__(self, message: object = ""):
        super().__init__(one_line(message))
