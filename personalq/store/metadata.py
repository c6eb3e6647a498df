"""Metadata from strangers (safetensors headers, YAML/JSON sidecars, catalog lines), parsed within
limits and stored trimmed.

Python's JSON and YAML parsers recurse, so nesting a few thousand levels deep raises `RecursionError`,
and a YAML alias bomb is small on disk but huge once walked. Everything here is parsed with the
library, the recursion caught, and then walked once with a budget: at most `MAX_DEPTH` levels and
`MAX_NODES` values (aliases counted each time they are reached), and no NUL characters in strings
(they end C strings in SQLite, paths and terminals). The catalog keeps a trimmed copy of a header's
metadata: each value cut at `MAX_STORED_VALUE_CHARS` characters and the whole at
`MAX_STORED_METADATA_CHARS`, so a 16 MiB header costs kilobytes per row, not megabytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from personalq.store.errors import MetadataRefused

MAX_DEPTH = 16
MAX_NODES = 20_000
MAX_SIDECAR_BYTES = 1024 * 1024
MAX_STORED_VALUE_CHARS = 2048
MAX_STORED_METADATA_CHARS = 64 * 1024
TRIMMED_MARK = "…[trimmed]"
_KNOWN_PREFIXES = ("modelspec.", "ss_", "lora_", "format")


def check_structure(value: Any, label: str) -> Any:
    """Refuse (one line) a value nested deeper than `MAX_DEPTH`, with over `MAX_NODES` parts, a NUL in
    a string, or a float that is not finite; return it unchanged otherwise."""
    budget = MAX_NODES
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise MetadataRefused(f"{label}: more than {MAX_NODES:,} values; not plausible metadata")
        if depth > MAX_DEPTH:
            raise MetadataRefused(f"{label}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            if "\x00" in item:
                raise MetadataRefused(f"{label}: contains a NUL character")
        elif isinstance(item, float) and not math.isfinite(item):
            raise MetadataRefused(f"{label}: {item} is not a finite number")
        elif isinstance(item, Mapping):
            for key, child in item.items():
                stack.append((key, depth + 1))
                stack.append((child, depth + 1))
        elif isinstance(item, (list, tuple, set)):
            stack.extend((child, depth + 1) for child in item)
    return value


def parse_json(text: str | bytes, label: str) -> Any:
    """`json.loads` within the limits; malformed or too deep is a `MetadataRefused`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise MetadataRefused(f"{label}: nested deeper than {MAX_DEPTH} levels") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise MetadataRefused(f"{label}: not valid JSON ({getattr(error, 'msg', None) or error})") from None
    return check_structure(value, label)


def load_yaml_file(path: Path) -> Any:
    """A YAML (or JSON) sidecar, at most `MAX_SIDECAR_BYTES`, parsed with `yaml.safe_load` within the limits."""
    import yaml

    label = f"metadata {path.name}"
    try:
        size = path.stat().st_size
        if size > MAX_SIDECAR_BYTES:
            raise MetadataRefused(f"{label}: {size:,} bytes is over the {MAX_SIDECAR_BYTES // 1024} KiB sidecar limit")
        text = path.read_text(encoding="utf-8")
        value = yaml.safe_load(text)
    except OSError as error:
        raise MetadataRefused(f"{label}: cannot read ({error.strerror or error})") from None
    except RecursionError:
        raise MetadataRefused(f"{label}: nested deeper than {MAX_DEPTH} levels") from None
    except (yaml.YAMLError, UnicodeDecodeError, ValueError) as error:
        raise MetadataRefused(f"{label}: not valid YAML/JSON ({str(error).splitlines()[0] if str(error) else type(error).__name__})") from None
    return check_structure(value, label)


def trimmed(metadata: Mapping[str, str]) -> dict[str, str]:
    """The copy of a header's `__metadata__` the catalog keeps: values cut at `MAX_STORED_VALUE_CHARS`,
    keys dropped once the total passes `MAX_STORED_METADATA_CHARS`, ModelSpec and kohya keys kept first
    (the file itself keeps the full header)."""
    kept: dict[str, str] = {}
    total = 0
    ordered = sorted(metadata.items(), key=lambda item: (not str(item[0]).startswith(_KNOWN_PREFIXES), str(item[0])))
    for key, value in ordered:
        key, value = str(key)[:256], str(value)
        if len(value) > MAX_STORED_VALUE_CHARS:
            value = value[:MAX_STORED_VALUE_CHARS] + TRIMMED_MARK
        total += len(key) + len(value)
        if total > MAX_STORED_METADATA_CHARS:
            kept[TRIMMED_MARK] = f"{len(metadata) - len(kept)} more keys"
            break
        kept[key] = value
    return kept
