"""An in-memory snapshot of the store's cards, indexed so every constraint is a fast set lookup.

Structured filtering over the whole catalog is what lets reasoning see every checkpoint that
satisfies a request: 50 bear versions score alike on text, so retrieval alone would drop some.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from personalq.checkin.intent import Constraint

_NAME = re.compile(r"<[^<>\s]+>|[\w.+-]+")
from personalq.checkin.vocabulary import CatalogVocabulary


class CatalogSnapshot:
    def __init__(self, cards: Sequence, embedder=None, revision: int | None = None):
        self.revision = revision
        self.cards = {c.id: c for c in cards}
        self.ids = list(self.cards)
        self.vocabulary = CatalogVocabulary(cards, embedder)
        self.by_version: dict[int, set[str]] = defaultdict(set)
        self.by_name: dict[str, set[str]] = defaultdict(set)  # an id or trigger, lower-case -> checkpoints
        for c in cards:
            if c.version is not None:
                self.by_version[c.version].add(c.id)
            for name in (c.id, *c.triggers):
                self.by_name[name.lower()].add(c.id)
        self._id_array = np.array(self.ids, dtype=object)
        self._times = {
            "created": self._time_columns([c.created_at for c in cards]),
            "used": self._time_columns([c.last_used_at for c in cards]),
        }

    @staticmethod
    def _time_columns(moments: list) -> tuple[np.ndarray, np.ndarray]:
        seconds = np.array([m.timestamp() if m is not None else np.nan for m in moments], dtype=np.float64)
        months = np.array([m.month if m is not None else 0 for m in moments], dtype=np.int8)
        return seconds, months

    def matching(self, constraint: Constraint) -> set[str]:
        a, v = constraint.attribute, constraint.value
        # A frozenset value is alternatives, any of which fits: the categories of "any animal", the
        # shades that stand for a colour ("navy" for blue), the versions of "v1 or v2".
        alternatives = v if isinstance(v, frozenset) else (v,)
        if a in ("subject", "style", "environment"):
            return set().union(*(self.vocabulary.terms[a].get(k, set()) for k in alternatives))
        if a == "cue":
            return set().union(*(self.vocabulary.cue_words.get(w, set()) for w in alternatives))
        if a == "version":
            return set().union(*(self.by_version.get(n, set()) for n in alternatives))
        if a in ("created", "used"):
            seconds, months = self._times[a]
            mask = ~np.isnan(seconds)
            if v.months:
                mask &= np.isin(months, v.months)
            if v.start is not None:
                mask &= seconds >= v.start.timestamp()
            if v.end is not None:
                mask &= seconds < v.end.timestamp()
            return set(self._id_array[mask].tolist())
        if a == "never_used":
            return {i for i, c in self.cards.items() if c.last_used_at is None and not use_count(c)}
        if a == "checkpoints":
            return set(v)
        return set()  # unknown subject: nothing has it

    def named(self, text: str):
        """The one checkpoint whose id or trigger the text contains whole ("use bear-v3", "<dog-v1> at
        dawn"), else None: naming it is a choice already made."""
        words = set(_NAME.findall(text.lower()))
        hits = set().union(*(self.by_name.get(w, set()) for w in words))
        return self.cards[hits.pop()] if len(hits) == 1 else None

    def moment(self, checkpoint_id: str, field: str):
        """What an order word sorts by: created_at, last_used_at or the use count (None: unknown)."""
        card = self.cards[checkpoint_id]
        if field == "use_count":
            return use_count(card)
        return card.created_at if field == "created" else card.last_used_at


def use_count(card) -> int | None:
    """How often a checkpoint was used, where its catalog entry says (an extra `use_count` key)."""
    count = (card.raw_metadata or {}).get("use_count")
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None
