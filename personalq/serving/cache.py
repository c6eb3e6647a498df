"""A least-recently-used cache of resident models and adapters, bounded by their real bytes.

Bytes are measured from the tensors actually held (shared storages counted once, quantized
tensor subclasses measured through their inner tensors), never from file sizes or estimates.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch


def _flat_tensors(tensor: torch.Tensor) -> Iterable[torch.Tensor]:
    """Plain tensors behind a tensor, unwrapping subclasses (quanto's QTensors) via `__tensor_flatten__`."""
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter) and hasattr(tensor, "__tensor_flatten__"):
        inner_names, _ = tensor.__tensor_flatten__()
        for name in inner_names:
            yield from _flat_tensors(getattr(tensor, name))
        return
    yield tensor


def _tensors_of(obj: Any) -> Iterable[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, torch.nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors_of(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _tensors_of(value)
    elif dataclasses.is_dataclass(obj):  # checkpoint payloads
        yield from _tensors_of(vars(obj))
    elif hasattr(obj, "components"):  # a diffusers pipeline
        yield from _tensors_of(list(obj.components.values()))


def resident_bytes(obj: Any) -> int:
    """Bytes of every tensor reachable from a module, pipeline, dict or list; each storage once."""
    seen: set[tuple[str, int]] = set()
    total = 0
    for tensor in _tensors_of(obj):
        for plain in _flat_tensors(tensor.data if type(tensor) is torch.nn.Parameter else tensor):
            if plain.device.type == "meta":
                continue
            if plain.layout == torch._mkldnn:  # oneDNN's packed weights hide their storage; they hold numel elements
                total += plain.numel() * plain.element_size()
                continue
            storage = plain.untyped_storage()
            key = (str(plain.device), storage.data_ptr())
            if key not in seen:
                seen.add(key)
                total += storage.nbytes()
    return total


@dataclass
class ResidentEntry:
    name: str
    kind: str
    value: Any
    bytes: int
    pinned: bool = False


class ResidentCache:
    """Entries kept in LRU order; inserting past the byte budget evicts the least recently used.

    Pinned entries (the base model) and entries in use by the running request are never evicted.
    `on_evict` lets the owner drop its own references so evicted memory is actually freed.
    """

    def __init__(self, budget_bytes: int | None = None, on_evict: Callable[[ResidentEntry], None] | None = None):
        self.budget_bytes = budget_bytes
        self.on_evict = on_evict
        self._entries: OrderedDict[str, ResidentEntry] = OrderedDict()
        self._in_use: set[str] = set()
        self._lock = threading.RLock()
        self.peak_bytes = 0
        self.evictions: list[str] = []

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def get(self, name: str) -> Any | None:
        """The entry's value, marked most recently used; None when not resident."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                return None
            self._entries.move_to_end(name)
            return entry.value

    def put(self, name: str, kind: str, value: Any, nbytes: int | None = None, pinned: bool = False) -> Any:
        """Insert (or replace) an entry, then evict LRU entries until the budget holds.

        Raises MemoryError when the entry cannot fit even after evicting everything evictable;
        the entry is then dropped again so nothing is left half-resident.
        """
        with self._lock:
            self._entries[name] = ResidentEntry(name, kind, value, resident_bytes(value) if nbytes is None else nbytes, pinned)
            self._entries.move_to_end(name)
            self._in_use.add(name)
            try:
                self._enforce_budget()
            except MemoryError:
                self._entries.pop(name)
                raise
            finally:
                self._in_use.discard(name)
            self.peak_bytes = max(self.peak_bytes, self.total_bytes())
            return value

    def remeasure(self, name: str) -> None:
        """Measure an entry again after it grew in place (e.g. an adapter slot was added to a UNet)."""
        with self._lock:
            entry = self._entries[name]
            entry.bytes = resident_bytes(entry.value)
            self._enforce_budget()
            self.peak_bytes = max(self.peak_bytes, self.total_bytes())

    def hold(self, names: Iterable[str]) -> None:
        """Protect these entries from eviction until `release` (the running request uses them)."""
        with self._lock:
            self._in_use.update(names)

    def release(self) -> None:
        with self._lock:
            self._in_use = set()

    def total_bytes(self) -> int:
        return sum(entry.bytes for entry in self._entries.values())

    def entries(self) -> list[tuple[str, str, int]]:
        """(name, kind, bytes), least recently used first."""
        with self._lock:
            return [(e.name, e.kind, e.bytes) for e in self._entries.values()]

    def evict(self, name: str) -> None:
        with self._lock:
            entry = self._entries.pop(name)
            self.evictions.append(name)
            if self.on_evict is not None:
                self.on_evict(entry)

    def evict_kinds_until(self, kinds: tuple[str, ...], limit: int) -> None:
        """Evict least recently used entries of `kinds` (not pinned, not in use) until those kinds hold at most `limit` bytes."""
        with self._lock:
            while sum(e.bytes for e in self._entries.values() if e.kind in kinds) > limit:
                victim = next((e for e in self._entries.values() if e.kind in kinds and not e.pinned and e.name not in self._in_use), None)
                if victim is None:
                    return
                self.evict(victim.name)

    def _enforce_budget(self) -> None:
        if self.budget_bytes is None:
            return
        while self.total_bytes() > self.budget_bytes:
            victim = next(
                (e for e in self._entries.values() if not e.pinned and e.name not in self._in_use),
                None,
            )
            if victim is None:
                raise MemoryError(
                    f"{self.total_bytes():,} resident bytes needed, over the memory budget of {self.budget_bytes:,}"
                )
            self.evict(victim.name)
