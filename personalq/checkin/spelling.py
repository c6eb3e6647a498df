"""Typos corrected against the catalog's own words: "hrose" is horse, "realstic" realistic.

Only a word that is no English word at all (WordNet knows no form of it) is corrected, and only to a
word the catalog or the request grammar uses, within a small Damerau-Levenshtein distance, and only
when that word is the single closest one (the margin): "tre" becomes tree when tree is the only
word one edit away, while a word two catalog words are equally near stays as typed, unless only one
of them differs by a missing or extra letter alone (the commonest slip). Two slips that also change
the first letter make another word, as typists seldom miss the first letter, and a word as near a
long known word ("whatevr") is that word mistyped. Chat that drops a word's vowels ("ltr") spells
the one target with those consonants. An unknown word that
misspells nothing is left alone, so it can still name a subject the catalog lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from rapidfuzz.distance import DamerauLevenshtein, Indel
from rapidfuzz.process import extract

_WORD = re.compile(r"[A-Za-z]+")
_VOWEL = re.compile(r"[aeiou]")
_COMPOUND = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
MIN_LENGTH = 3
SOUNDED_MIN_LENGTH = 5
LONG_KNOWN_LENGTH = 6  # a known word this long ("whatever") is one a typo may be of, too
CLIPPED_MIN_LENGTH = 4  # "photoreal" for photorealistic: a prefix this long of exactly one longer word
DIMINUTIVE_ENDINGS = ("ies", "ie", "ey", "y", "o")  # "walrie" for walrus: a clipped word with a pet ending


# one spelling for sounds English spells two ways: "elefant", "snak", "kamera"
_SOUNDS = ((re.compile("ph"), "f"), (re.compile("ck"), "k"), (re.compile("c(?![eiy])"), "k"))


def _skeleton(word: str, doubled: bool = False) -> str:
    """The first letter, then the consonants, each sound spelt one way and doubled letters once
    (twice with `doubled`): "letter" -> "ltr", "elephant" and "elefant" -> "elfnt"."""
    for pattern, sound in _SOUNDS:
        word = pattern.sub(sound, word)
    rest = _VOWEL.sub("", word[1:])
    return word[0] + (rest if doubled else re.sub(r"(.)\1+", r"\1", rest))


def max_edits(word: str) -> int:
    """One edit in a short word, two from seven letters on ("crossaint")."""
    return 2 if len(word) >= 7 else 1


class Speller:
    def __init__(self, targets: Iterable[str], known: Iterable[str], is_word: Callable[[str], bool] | None,
                 weak: Iterable[str] = ()):
        """`weak`: targets a three-letter word is never corrected to ("lil" is no typo of a card's "lily")."""
        self.targets = sorted({t.lower() for t in targets if len(t) >= MIN_LENGTH and t.isalpha()})
        self._weak = {w.lower() for w in weak}
        self._target_set = set(self.targets)
        self._known = self._target_set | {k.lower() for k in known}
        self._long_known = sorted(k for k in self._known - self._target_set if len(k) >= LONG_KNOWN_LENGTH)
        self.is_word = is_word
        self._cache: dict[str, str | None] = {}
        self._skeletons: dict[str, list[str]] | None = None  # `_skeleton` of each target, built on first need

    def correct_word(self, word: str) -> str | None:
        """The target word `word` misspells, or None."""
        key = word.lower()
        if key in self._cache:
            return self._cache[key]
        found = None
        if len(key) >= MIN_LENGTH and key not in self._known and not (self.is_word and self.is_word(key)):
            found = self._nearest(key) or self._clipped(key) or self._sounded_alike(key)
        self._cache[key] = found
        return found

    def _nearest(self, key: str) -> str | None:
        limit = max_edits(key)
        best = [hit for hit in extract(key, self.targets, scorer=DamerauLevenshtein.distance, score_cutoff=limit, limit=None)
                if len(key) > MIN_LENGTH or self._short_typo(key, hit[0])]
        tied = [hit for hit in best if hit[1] == best[0][1]] if best else []
        if len(tied) > 1:  # "wich": a dropped letter of "which" before a changed one of "with"
            by_letters = sorted((Indel.distance(key, hit[0]), hit) for hit in tied)
            tied = [] if by_letters[0][0] == by_letters[1][0] else [by_letters[0][1]]
        if not tied:
            return None
        word, distance, _ = tied[0]
        if distance > 1 and word[0] != key[0]:  # two slips and another first letter: another word, no typo
            return None
        if extract(key, self._long_known, scorer=DamerauLevenshtein.distance, score_cutoff=distance, limit=1):
            return None  # "whatevr": as near a long known word ("whatever") as a target, so no typo of the target
        return word if distance < len(key) - 1 else None

    def _short_typo(self, key: str, word: str) -> bool:
        """A three-letter word may lack a letter ("tre") or swap two ("teh"), never change one ("idk")."""
        return word not in self._weak and (len(word) > len(key) or sorted(word) == sorted(key))

    def _clipped(self, key: str) -> str | None:
        stems = [key] + [key[: -len(end)] for end in DIMINUTIVE_ENDINGS if key.endswith(end)]
        for stem in stems:
            longer = [t for t in self.targets if t.startswith(stem) and len(t) > len(key)] if len(stem) >= CLIPPED_MIN_LENGTH else []
            if len(longer) == 1:
                return longer[0]
        return None

    def _sounded_alike(self, key: str) -> str | None:
        """"ltr", "typwrtr", "parlr", "fotografer": chat drops a word's vowels after the first letter,
        and its doubled letters, and a word is spelt as it sounds; the one target whose consonants
        sound so is the word meant. A word that keeps vowels is one of `SOUNDED_MIN_LENGTH` letters
        or more and keeps the target's doubled letters too (two letters where the target has one make another word)."""
        vowelled = bool(_VOWEL.search(key, 1))
        if len(key) < (SOUNDED_MIN_LENGTH if vowelled else MIN_LENGTH):
            return None
        if self._skeletons is None:
            self._skeletons = {}
            for target in self.targets:
                self._skeletons.setdefault(_skeleton(target), []).append(target)
        found = self._skeletons.get(_skeleton(key), [])
        if len(found) != 1 or vowelled and _skeleton(key, doubled=True) != _skeleton(found[0], doubled=True):
            return None
        return found[0]

    def joined(self, text: str) -> str:
        """Two typed words that together spell one target word ("tree house") as that word, unless
        each is a target word on its own or one is a single letter, a word of its own ("w all" is
        "with all", "a corn" no acorn)."""
        words = list(_WORD.finditer(text))
        out, last = [], 0
        i = 0
        while i < len(words):
            a = words[i]
            if i + 1 < len(words):
                b = words[i + 1]
                whole = (a.group() + b.group()).lower()
                gap = text[a.end():b.start()]
                if whole in self._target_set and re.fullmatch(r"[ -]", gap) and min(len(a.group()), len(b.group())) > 1 and not (
                        a.group().lower() in self._target_set and b.group().lower() in self._target_set):
                    out += [text[last:a.start()], whole]
                    last, i = b.end(), i + 2
                    continue
            i += 1
        return "".join(out) + text[last:]

    def correct(self, text: str) -> str:
        """`text` with split words joined, then each misspelt word replaced by the word it stands for
        (case of the first letter kept)."""
        def fix(m: re.Match) -> str:
            found = self.correct_word(m.group())
            if found is None:
                return m.group()
            return found.capitalize() if m.group()[0].isupper() else found

        def fix_compound(m: re.Match) -> str:
            whole = m.group().lower()
            if "-" in whole and (whole in self._known or (self.is_word and self.is_word(whole))):
                return m.group()  # a hyphened English word stays whole, though a part alone is none
            return _WORD.sub(fix, m.group())

        return _COMPOUND.sub(fix_compound, self.joined(text))  # joined first: "tele scope" is no typo of "tile"
