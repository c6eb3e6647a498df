"""The catalog's own words: which checkpoints each subject, style, place and description word names.

Check-in knows no subject or style list of its own. It snapshots the store's cards into these
indexes and resolves a word the catalog does not contain through the embedder (ordinary synonyms:
"kitty" for cat) or through spelling closeness ("watercolour" for watercolor).
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

_WORD = re.compile(r"[A-Za-z0-9]+")

# Words about checkpoints and requests themselves; they never name what a checkpoint shows.
DOMAIN_WORDS = frozenset(
    "model models checkpoint checkpoints lora loras weights embedding version versions build builds one ones "
    "style styled styles picture pictures image images shot shots scene scenes render rendered trained training "
    "train created create made make generate use used using want need please like give show pick select "
    "mine look looking kind thing".split()
) | frozenset("near inside outside atop".split())  # place prepositions sklearn's list lacks
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS) | DOMAIN_WORDS

# Each attribute's terms and an unknown word are embedded inside one sentence template, which
# separates true synonyms ("kitty", "manga") from mere neighbours ("giraffe" for horse) far better
# than bare words do; the floors are cosine similarities under those templates.
MEANING_TEMPLATES = {"subject": "a photo of a {}", "style": "an image in {} style", "environment": "a photo taken at the {}"}
MEANING_FLOORS = {"subject": 0.70, "style": 0.70, "environment": 0.75}
# The bare word must also be somewhat close: templates alone pull any short word ("sure") upward.
BARE_MEANING_FLOOR = 0.45
SPELLING_MIN_RATIO = 0.85


def norm(token: str) -> str:
    """Fold plurals so "beaches" meets "beach" and "bears" meets "bear"."""
    t = token.lower()
    if len(t) > 4 and t.endswith("ies"):
        return t[:-3] + "y"
    if len(t) > 4 and t.endswith(("ches", "shes", "xes", "sses")):
        return t[:-2]
    if len(t) > 3 and t.endswith("s") and not t.endswith(("ss", "us", "is")):
        return t[:-1]
    return t


@dataclass(frozen=True)
class Token:
    text: str  # as typed
    key: str  # normalised
    start: int
    end: int


def tokens(text: str) -> list[Token]:
    return [Token(m.group(), norm(m.group()), m.start(), m.end()) for m in _WORD.finditer(text)]


def term_key(phrase: str) -> tuple[str, ...]:
    return tuple(norm(m.group()) for m in _WORD.finditer(phrase))


class CatalogVocabulary:
    """Term -> checkpoint ids for subjects, styles and environments, and a word index of descriptions."""

    ATTRIBUTES = ("subject", "style", "environment")

    def __init__(self, cards: Sequence, embedder=None):
        self.embedder = embedder
        self.terms: dict[str, dict[tuple[str, ...], set[str]]] = {a: defaultdict(set) for a in self.ATTRIBUTES}
        self.labels: dict[tuple[str, tuple[str, ...]], str] = {}
        self.categories: dict[tuple[str, ...], set[str]] = defaultdict(set)
        self.cue_words: dict[str, set[str]] = defaultdict(set)
        for card in cards:
            fields = {
                "subject": [card.category, *card.subject_types],
                "style": list(card.style_tags),
                "environment": list(card.environment),
            }
            for attribute, phrases in fields.items():
                for phrase in phrases:
                    key = term_key(phrase)
                    if key:
                        self.terms[attribute][key].add(card.id)
                        self.labels.setdefault((attribute, key), phrase.lower())
            self.categories[term_key(card.category)].add(card.id)
            for tok in tokens(f"{card.description} {' '.join(card.environment)}"):
                if tok.key not in STOP_WORDS:
                    self.cue_words[tok.key].add(card.id)
        self.subject_words = {part for key in self.terms["subject"] for part in key}
        self.max_term_len = max((len(k) for table in self.terms.values() for k in table), default=1)
        self._term_list = [(a, k) for a in self.ATTRIBUTES for k in self.terms[a]]
        self._term_vectors: dict[str, np.ndarray] | None = None
        self._bare_vectors: dict[str, np.ndarray] = {}
        self._word_cache: dict[str, tuple[str, tuple[str, ...], float] | None] = {}

    def exact(self, key: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
        for attribute in self.ATTRIBUTES:
            if key in self.terms[attribute]:
                return attribute, key
        return None

    def similar(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        """The vocabulary term an unknown word or phrase stands for, if any is close enough, with a
        strength: a spelling match (>= 0.8) beats a meaning match (cosine above its floor, < 0.3)."""
        if phrase in self._word_cache:
            return self._word_cache[phrase]
        found = self._by_spelling(phrase) or self._by_meaning(phrase)
        self._word_cache[phrase] = found
        return found

    def _by_spelling(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        """Style and place spelling variants and derived forms: "watercolour", "cartoony", "photorealistic", "toon"."""
        if len(phrase) < 4:
            return None
        best, best_ratio = None, SPELLING_MIN_RATIO
        for attribute, key in self._term_list:
            if attribute == "subject":  # "cat" is not "tabby cat": subjects go by meaning only
                continue
            label = " ".join(key)
            contained = any(len(part) >= 5 and len(phrase) - len(part) <= 5 and (phrase.startswith(part) or phrase.endswith(part))
                            for part in key)
            clipped = " " not in phrase and any(part.endswith(phrase) and len(part) - len(phrase) <= 3 for part in key)
            if contained or clipped:
                ratio = 1.0
            elif len(phrase) >= 5:
                ratio = difflib.SequenceMatcher(None, phrase, label).ratio()
            else:
                continue
            if ratio > best_ratio or (best is None and ratio >= best_ratio):
                best, best_ratio = (attribute, key, ratio), ratio
        return best

    def _by_meaning(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        if self.embedder is None or not self._term_list:
            return None
        if self._term_vectors is None:
            self._term_vectors = {
                a: self.embedder.embed([MEANING_TEMPLATES[a].format(self.labels[(a, k)]) for k in self.terms[a]])
                for a in self.ATTRIBUTES if self.terms[a]
            }
            self._bare_vectors = {a: self.embedder.embed([self.labels[(a, k)] for k in self.terms[a]]) for a in self._term_vectors}
        vectors = self.embedder.embed([phrase, *(MEANING_TEMPLATES[a].format(phrase) for a in self._term_vectors)])
        bare, queries = vectors[0], vectors[1:]
        best, best_margin = None, 0.0
        for (attribute, vectors), query in zip(self._term_vectors.items(), queries):
            scores = vectors @ query
            keys = list(self.terms[attribute])
            top = int(np.argmax(scores))
            margin = float(scores[top]) - MEANING_FLOORS[attribute]
            if margin < best_margin or float(self._bare_vectors[attribute][top] @ bare) < BARE_MEANING_FLOOR:
                continue
            key = keys[top]
            if attribute == "subject" and key not in self.categories:
                # An ordinary word is usually the general noun: prefer the category when it scores nearly as well.
                for i in np.argsort(-scores)[1:6]:
                    if keys[int(i)] in self.categories and scores[i] >= scores[top] - 0.08:
                        key = keys[int(i)]
                        break
            best, best_margin = (attribute, key, margin), margin
        return best
