"""Lazy package exports (PEP 562), so `personalq --help` and the store commands don't pay for torch.

A subpackage's `__init__` names what it exports and where it lives; the module is imported the first
time one of its names is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A module-level `__getattr__` that resolves `exports` (name -> module) on first use."""

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name]), name)

    return __getattr__
