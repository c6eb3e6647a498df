"""How every `personalq` command refuses: one literal line on stderr, then a non-zero exit status."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text


def fail(message: str, code: int = 1) -> NoReturn:
    """Print "error: MESSAGE" (user text inside it is never read as markup) and exit with CODE."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(Text.assemble(("error:", "red"), " ", str(message)))
    raise typer.Exit(code)
