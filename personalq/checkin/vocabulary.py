"""The catalog's own words: which checkpoints each subject, style, place and description word names.

Check-in knows no subject or style list of its own. It snapshots the store's cards into these
indexes and resolves a word the catalog does not contain through the embedder (ordinary synonyms:
"kitty" for cat), through spelling closeness ("watercolour" for watercolor), or, for subjects the
embedder cannot place, through WordNet's noun relations ("steed" is a kind of horse, "timepiece"
the kind a watch is, "automobile" another name for car).
"""

from __future__ import annotations

import difflib
import functools
import itertools
import os
import re
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from personalq.checkin.lexicon import ART_FORMS, ORGANISM, PERSON, PHYSICAL_ENTITY, PLACES, WordNet, verb_stems, word_forms, wordnet
from personalq.checkin.spelling import LONG_KNOWN_LENGTH, Speller

_WORD = re.compile(r"[A-Za-z0-9]+")

# Words about checkpoints and requests themselves; they never name what a checkpoint shows.
DOMAIN_WORDS = frozenset(
    "model models checkpoint checkpoints lora loras weights embedding version versions build builds one ones "
    "style styled styles picture pictures image images shot shots scene scenes render rendered trained training "
    "train created create made make generate use used using want need please like give show pick select "
    "mine look looking kind thing stuff piece photo photograph pic draw switch change swap".split()
) | frozenset("near inside outside atop".split())  # place prepositions sklearn's list lacks
# Chat words no dictionary holds ("nope", "pls", "ur"): a speller must not turn "nope" into a catalog
# word ("rope"), and none of them names anything. A hand list: no package ships English chat slang.
CHAT_WORDS = frozenset(
    "nope nah naw yep yup yeah ya ok okay k pls plz thx ty lol ur u r gonna wanna gotta kinda sorta idk "
    "hmm hm ooh oh ah uh um umm hey hi yo wait ugh welp alright lil smol just outta smth sth gimme whichever "
    "dunno ive im youre thats whats isnt arent wasnt werent dont doesnt didnt havent hasnt idc tbh ngl imo btw omg lmk smh fyi rn kno tho".split()  # "ive", "isnt": no apostrophe typed
)
# Casual words for "the one" ("the little guy in the poncho", "that dude"): they stand for whatever
# the card shows and never name a subject of their own. A hand list, for the reason above.
STAND_IN_WORDS = frozenset("guy guys dude dudes fella fellas buddy lad chap bloke".split())
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS) | DOMAIN_WORDS | CHAT_WORDS | STAND_IN_WORDS
_LONG_STOP_WORDS = frozenset(w for w in STOP_WORDS if len(w) >= LONG_KNOWN_LENGTH)  # "whatever", "checkpoint"

# Each attribute's terms and an unknown word are embedded inside one sentence template, which
# separates true synonyms ("kitty", "manga") from mere neighbours ("giraffe" for horse) far better
# than bare words do; the floors are cosine similarities under those templates.
MEANING_TEMPLATES = {"subject": "a photo of a {}", "style": "an image in {} style", "environment": "a photo taken at the {}"}
MEANING_FLOORS = {"subject": 0.70, "style": 0.70, "environment": 0.75}
# The bare word must also be somewhat close: templates alone pull any short word ("sure") upward.
BARE_MEANING_FLOOR = 0.45
ONE_THING_FLOOR = 0.87  # two names MiniLM puts this near are one thing, whatever their head nouns
SPELLING_MIN_RATIO = 0.85
UNKNOWN_NAME_MIN_LENGTH = 4  # "idc", "tbh", "ngl": chat shorthand is short
SHORT_NAME_LENGTH = 3  # a short name its phrase shows to be a thing ("the <name> in ..."; see intent._absent_subject)
MISSPELLING_RATIO = 0.7  # below SPELLING_MIN_RATIO: too far to correct, yet too near to be another word
MISSPELLING_LENGTH_GAP = 2  # a misspelling drops or adds a letter or two, not a syllable
SPELLING_SHARED_START = 3  # letters two spellings of one word share at their start (see _distinct_nouns)
# "papermarbled" of "paper-marbling", "quilted" of "quilting": endings two forms of one style word may differ by
DERIVED_ENDINGS = re.compile(r"(?:ing|ed|d|ism|ist|y|s)$")
DERIVED_MIN_STEM = 5
# "in snowy weather": a place word this few steps above the request's own place
# only restates it (snow is weather two steps down).
PLACE_ABOVE_MAX_UP = 3
# WordNet links a word to a subject term when the word's usual noun sense (its most frequent one)
# is a sense of the term or a kind of it at most LEXICON_MAX_UP hypernym steps down ("steed" ->
# warhorse -> saddle horse -> horse), or is the term's direct hypernym ("timepiece" for watch).
# Rare senses never count: "elephant" is also a party emblem, "bird" a shuttlecock. Siblings never
# link: a giraffe and a horse are both ungulates, yet neither is a kind of the other. A catalog term
# keeps only the senses its own cards agree on, those within LEXICON_SENSE_DEPTH steps of a sense of
# the category (or sub-type) named beside it: cats that are tabby cats are not WordNet's "guy" sense.
LEXICON_MAX_UP = 3
OPTION_MAX_UP = 12  # an answer's word may name an offered option this far above it ("the animal" for a wild ox)
GENERAL_WORD_KINDS = 10  # a word with this many kinds below it is broad: "boat", "flower", "basket" (12); "walrus" has 2
# A subject the embedder puts near a catalog subject is turned down when WordNet files both as kinds
# of one thing at most SIBLING_UP steps up and neither as the other (wolf and dog, donkey and horse).
SIBLING_UP = 2
LEXICON_SENSE_DEPTH = 5
# With an embedder, the link must also point into one of the word's LEXICON_NEAR_CATEGORIES
# nearest categories by meaning (each category ranked by its closest term): a sense check on WordNet.
LEXICON_NEAR_CATEGORIES = 3
LEXICON_STRENGTH = 0.1  # below any spelling match; a meaning match of the embedder is taken before it
# A word whose usual sense is at most HYPERNYM_MAX_DOWN steps above catalog subjects names them all
# ("animal" is eight steps above a horse); weaker than any link but a head noun.
HYPERNYM_MAX_DOWN = 10
HYPERNYM_STRENGTH = 0.05
HEAD_NOUN_STRENGTH = 0.04  # the last word of a compound subject: the weakest link, taken when no other holds
# A style described in its WordNet definition's words ("soluble pigment"): read before the embedder,
# which puts such a phrase near whatever style sounds alike, yet weaker than every link on its own.
DEFINITION_STRENGTH = 0.04
# "an area of sand": the bare noun after "of" in a place's definition is what it is made of.
_MADE_OF = re.compile(r"\bof\s+(?!(?:a|an|the|its|their|some|any|one|two|many|several|various)\b)([a-z]+)")
SHADE_MAX_UP = 3  # a description's shade is at most this far below the colour asked for: tangerine -> reddish orange -> orange
# What a style is, in words: an unknown modifier whose bare embedding comes this near one of these
# reads as a style the catalog lacks ("graffiti" 0.47, "cartoon" 0.39, "anime" 0.38), while plain
# modifiers stay below ("favorite" 0.21, "wild" 0.21, "wooden" 0.31); MiniLM cosine similarities.
STYLE_ANCHORS = ("an art style", "a visual art style or medium", "a style of drawing or painting")
STYLE_LIKE_FLOOR = 0.33
_DEFAULT = object()
# A description word on more than this share of the cards is no cue (with at least COMMON_MIN_CARDS cards).
COMMON_SHARE = 0.5
COMMON_MIN_CARDS = 4


# WordNet's definition of an informal or general word by the word it stands for: "informal terms for dogs"
_TERM_FOR = re.compile(r"(?:a\s+)?(?:general|informal|regional|familiar)\s+terms?\s+for\s+[`']?(?:any\s+)?([a-z]+)")


def norm(token: str) -> str:
    """Fold plurals so "beaches" meets "beach" and "bears" meets "bear"."""
    t = token.lower()
    if len(t) > 4 and t.endswith("ies"):
        return t[:-3] + "y"
    if len(t) > 4 and t.endswith(("ches", "shes", "xes", "sses", "tzes")):  # "waltzes"
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


# "haven't", "didn't": the word before "n't" is an auxiliary with a negation, never a noun ("haven").
_NEGATED = re.compile(r"n['’]t\b", re.I)
# "whatever's", "I'd", "you're": a clitic after an apostrophe is no word of its own
_CLITIC = re.compile(r"(?<=\w)['’](?:s|d|ll|re|ve|m)\b", re.I)


def tokens(text: str) -> list[Token]:
    """The words of a text; "isn't" is "isn" read as "not", its "t" no word at all, nor the "s" of "what's"."""
    return [Token(m.group(), "not" if m.group()[-1:].lower() == "n" and _NEGATED.match(text, m.end() - 1) else norm(m.group()),
                  m.start(), m.end()) for m in _WORD.finditer(text)
            if not (m.group().lower() == "t" and m.start() >= 2 and _NEGATED.match(text, m.start() - 2)
                    or m.start() >= 1 and _CLITIC.match(text, m.start() - 1))]


def term_key(phrase: str) -> tuple[str, ...]:
    """A term's words as a request's are read ("dealer's choice" is dealer, choice), so the two can meet."""
    return tuple(t.key for t in tokens(phrase))


# Berlin and Kay's eleven basic colour terms: what a survey shade is filed under ("plum" under purple)
BASIC_COLOURS = ("black", "white", "red", "green", "yellow", "blue", "brown", "purple", "pink", "orange", "grey")


@functools.cache
def survey_colours() -> dict[str, tuple[float, float, float]]:
    """The colours of the XKCD colour survey by name ("plum", "plum purple"), as matplotlib ships them."""
    from matplotlib.colors import XKCD_COLORS, to_rgb

    return {name.removeprefix("xkcd:"): to_rgb(value) for name, value in XKCD_COLORS.items()}


@functools.cache
def _survey_shade_of(word: str, colours: tuple[str, ...]) -> str | None:
    """The colour the survey files a shade under: of the colours it names the word with ("mustard
    yellow", "mustard green"), the nearest to the word's own colour."""
    survey = survey_colours()
    named = [c for c in colours if f"{word} {c}" in survey]
    if word not in survey or not named:
        return None
    return min(named, key=lambda c: sum((a - b) ** 2 for a, b in zip(survey[word], survey[c])))


def _one_stem(word: str, term: str) -> bool:
    """Whether two words are forms of one stem, by their endings: "papermarbled" of a "paper-marbling"
    written as one word, "quilted" of "quilting"."""
    stem = DERIVED_ENDINGS.sub("", word)
    return " " not in word and word != term and len(stem) >= DERIVED_MIN_STEM and stem == DERIVED_ENDINGS.sub("", term)


# British and American spellings of one word ("colour" and "color", "centre" and "center"): a hand list
# of the regular patterns, as no small package ships them
_SPELLING_PAIRS = (("our", "or"), ("re", "er"), ("ise", "ize"), ("yse", "yze"), ("ogue", "og"))


def _other_spellings(word: str) -> list[str]:
    """The word in the other spelling of each pattern it ends in or holds: "tricolour" -> "tricolor"."""
    found = []
    for one, other in _SPELLING_PAIRS + tuple((b, a) for a, b in _SPELLING_PAIRS):
        at = word.rfind(one)
        if len(word) >= 5 and at > 1 and (one == "our" or at + len(one) == len(word)):
            found.append(word[:at] + other + word[at + len(one):])
    return found


class CatalogVocabulary:
    """Term -> checkpoint ids for subjects, styles and environments, and a word index of descriptions."""

    ATTRIBUTES = ("subject", "style", "environment")

    def __init__(self, cards: Sequence, embedder=None, lexicon: WordNet | None = _DEFAULT):
        self.embedder = embedder
        self.lexicon = wordnet() if lexicon is _DEFAULT else lexicon
        self.terms: dict[str, dict[tuple[str, ...], set[str]]] = {a: defaultdict(set) for a in self.ATTRIBUTES}
        self.labels: dict[tuple[str, tuple[str, ...]], str] = {}
        self.categories: dict[tuple[str, ...], set[str]] = defaultdict(set)
        self.term_categories: dict[tuple[str, ...], set[tuple[str, ...]]] = defaultdict(set)  # subject term -> its cards' categories
        self.cue_words: dict[str, set[str]] = defaultdict(set)
        self.description_pairs: set[tuple[str, str]] = set()  # adjacent description words ("tabby cat")
        self.shade_only_colours: set[str] = set()  # basic colours no card writes, only a survey shade of them
        described_keys: dict[str, list[str]] = {}  # card id -> its description's word keys, read once
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
            category = term_key(card.category)
            self.categories[category].add(card.id)
            for phrase in fields["subject"]:
                if term_key(phrase):
                    self.term_categories[term_key(phrase)].add(category)
            described = tokens(card.description)
            for tok in described + tokens(" ".join(card.environment)):
                if tok.key not in STOP_WORDS:
                    self.cue_words[tok.key].add(card.id)
            keys = described_keys[card.id] = [t.key for t in described]
            self.description_pairs.update(zip(keys, keys[1:]))
        self.subject_words = {part for key in self.terms["subject"] for part in key}
        self._places_in_descriptions(described_keys)
        self._survey_shades_in_descriptions(described_keys)
        self._drop_common_cues(len(cards))
        self.max_term_len = max((len(k) for table in self.terms.values() for k in table), default=1)
        self._term_list = [(a, k) for a in self.ATTRIBUTES for k in self.terms[a]]
        # "corkboard" for a "cork board": a term of several words typed as one
        self._closed_forms = {("".join(k),): (a, k) for a, k in self._term_list if len(k) > 1}
        self._term_vectors: dict[str, np.ndarray] | None = None
        self._bare_vectors: dict[str, np.ndarray] = {}
        self._word_cache: dict[str, tuple[str, tuple[str, ...], float] | None] = {}
        self._sense_terms: dict[int, set[tuple[str, ...]]] | None = None  # a term's WordNet sense -> terms
        self._parent_terms: dict[int, set[tuple[str, ...]]] = {}  # a direct hypernym of a term's sense -> terms
        self._sense_ancestors: dict[int, Collection[int]] | None = None  # a term's WordNet sense -> its hypernyms, far up
        # (attribute, style or place term) -> its WordNet senses and their direct hypernyms
        self._term_senses: dict[tuple[str, tuple[str, ...]], tuple[set[int], set[int]]] | None = None
        self._near_categories: dict[str, set[tuple[str, ...]]] = {}  # a phrase -> the embedder's nearest categories
        self._terms_below: dict[int, set[tuple[str, ...]]] | None = None  # a sense -> subject terms a few steps below it
        self._spellers: dict[frozenset[str], Speller] = {}
        self._style_anchors: np.ndarray | None = None
        self._style_cache: dict[str, bool] = {}
        self._shades: dict[str, set[int]] | None = None  # a colour description word -> its senses' hypernyms
        # a style -> its senses' definition words, and those words' base forms
        self._style_definitions: dict[tuple[str, ...], list[tuple[frozenset[str], set[str]]]] | None = None
        self._place_matter: dict[str, set[tuple[str, ...]]] | None = None  # a noun -> the places WordNet defines as made of it
        # a genus word -> the places and description words it is the genus of, each with its definition's words in any form
        self._genus_of: dict[str, list[tuple[str, object, set[str]]]] | None = None

    def base_form(self, key: str) -> str:
        """The description word an inflected word stands for ("striped" for stripes, "spotted" for
        spots, "sleepy" for sleeping), or the same form of a WordNet synonym of its verb ("floating"
        for drifting), or the adjective a card makes of it ("wooden" for wood, "rusty" for rust), when
        the word itself is in no card; else the word unchanged."""
        if key in self.cue_words or self.exact((key,)):
            return key
        spelled = next((other for other in _other_spellings(key) if other in self.cue_words), None)
        if spelled is not None:  # "tricolour" where a card says "tricolor"
            return spelled
        if len(key) >= 4:  # "tin" is never "tiny"
            adjective = next((a for a in (key + "en", key + "y") if a in self.cue_words), None)
            if adjective is not None:
                return adjective
        if len(key) < 5:
            short = key[:-1] + "e" if key.endswith("y") and len(key) >= 3 else ""  # "icy" for a card's "ice"
            return short if short in self.cue_words else key
        for suffix in ("ed", "ing", "y"):
            if key.endswith(suffix):
                stem = key[: -len(suffix)]
                for form in (stem, stem + "e", stem[:-1] if len(stem) > 2 and stem[-1] == stem[-2] else None):
                    for inflected in (form, f"{form}ing", f"{form}ed") if form else ():  # "sleepy" for a card's "sleeping"
                        if inflected in self.cue_words:
                            return inflected
        return min(self.synonym_forms(key), default=key)

    def synonym_forms(self, key: str) -> set[str]:
        """Description words that are the same "-ing" or "-ed" form of a WordNet synonym of the word's
        verb: "drifting" for floating (float and drift share their most frequent sense)."""
        suffix = next((s for s in ("ing", "ed") if key.endswith(s)), None)
        if suffix is None or self.lexicon is None:
            return set()
        others = {other for verb in verb_stems(key) for other in self.lexicon.verb_synonyms(verb)}
        return {form for other in others for form in (other + suffix, other[:-1] + suffix, other + other[-1] + suffix)
                if form in self.cue_words}

    def names_every_card_of(self, word: str, subject: tuple[str, ...]) -> bool:
        """Whether the word belongs to a longer subject term that every card of `subject` lists
        ("house" of "house cat" on all the cats): said beside the subject, it names the subject."""
        cards = self.terms["subject"].get(subject, set())
        return bool(cards) and any(len(key) > 1 and word in key and cards <= ids for key, ids in self.terms["subject"].items())

    def names_thing(self, word: str) -> bool:
        """Whether an unknown word names something to draw (so a catalog without it has no match);
        without WordNet every word is taken to."""
        return self.lexicon is None or self.lexicon.names_thing(word)

    def thing_meant_by(self, word: str) -> str | None:
        """The noun for a thing a non-word misspells ("peacok") or is a pet form of ("froggy"); without WordNet none."""
        lex = self.lexicon
        return lex.misspelled_noun(word, lex.names_thing) or lex.pet_form_of(word) if lex is not None else None

    def medium_meant_by(self, word: str) -> str | None:
        """The medium a non-word misspells ("wotercolor"); without WordNet none."""
        return self.lexicon.misspelled_noun(word, self.lexicon.names_medium) if self.lexicon is not None else None

    def names_creature(self, word: str) -> bool:
        """Whether an unknown word names an animal, a person, a plant or an imaginary being; without WordNet none does."""
        return self.lexicon is not None and self.lexicon.names_creature(word)

    def is_creature_noun(self, word: str) -> bool:
        """Whether the word is above all a noun for a creature: "walrus", not "grey", which WordNet also
        knows as an animal of that coat."""
        return self.names_creature(word) and self.lexicon.is_mainly_noun(word)

    def style_clipped_to(self, word: str) -> tuple[str, ...] | None:
        """The one style whose start the word is ("water" of watercolour, a "<word> <kind>" style's first
        word), when the word is said before a medium noun ("water painting"), after "in" ("in lino") or
        alone before "one" ("the gold one"); a clipped word names nothing elsewhere."""
        hits = [key for key in self.terms["style"] if len(word) >= 4 and (
            len(key) == 1 and key[0].startswith(word) and key[0] != word or len(key) > 1 and key[0] == word)]
        return hits[0] if len(hits) == 1 else None

    def tells_apart(self, phrase: str, attribute: str, key: object) -> bool:
        """Whether WordNet knows the phrase and the term as nouns and neither as the other or a kind of it
        (`_siblings`); a term of alternatives is never told apart."""
        return isinstance(key, tuple) and self._siblings(phrase, self.labels[(attribute, key)], attribute)

    def names_look_by_name(self, word: str) -> bool:
        """Whether a leftover word said as how something is shown ("as a <word>", "a <word> of the
        <subject>") names a look: a name WordNet lacks or knows only as a brand (`names_unknown`), or a
        kind of photograph. Without WordNet none does."""
        return self.names_unknown(word) or self.lexicon is not None and self.lexicon.names_kind_of_photograph(word)

    def names_art_form(self, word: str) -> bool:
        """Whether an unknown word names a style (a kind of art); without WordNet none does."""
        return self.lexicon is not None and self.lexicon.names_art_form(word)

    def names_art_itself(self, word: str) -> bool:
        """Whether a word names art in general ("art"), which asks for no subject and no style; without WordNet none does."""
        return self.lexicon is not None and self.lexicon.names_art_itself(word)

    def other_kind_of_term(self, phrase: str, attribute: str, key: object) -> bool:
        """Whether a two-word phrase names another kind of thing than a two-word term it shares a word
        with ("pen sketch" for a pencil sketch, "straw man" for a straw hat), or than each of the terms
        a word names alike ("a fish shop" where the shops are a tea shop and a pipe shop)."""
        keys = key if isinstance(key, frozenset) else (key,)
        return all(k in self.terms[attribute] and self._other_kind(phrase, self.labels[(attribute, k)], attribute) for k in keys)

    def _other_kind(self, phrase: str, label: str, attribute: str) -> bool:
        """Two two-word names that agree in one word and whose other words are nouns WordNet knows
        apart name two kinds of thing, whatever MiniLM says: of one head noun (or its synonym), a film
        poster is no circus poster, a game room no music room, an oak grove no elm wood; of one
        modifier, a straw man is no straw hat and a tin drum no tin bell where MiniLM
        does not put the two as one (a coffee maker is a coffee machine), though one place may go by
        two heads (a taxi rank is a taxi stand). Modifiers that are no nouns may say one thing twice
        (leaded and painted glass), and one a card of the term describes says what it is made of
        ("wool felt" where its cards say wool). A creature before a style's head is what is drawn ("a
        walrus decal" is a decal of a walrus), no kind of it."""
        mine, theirs = phrase.split(), label.split()
        if self.lexicon is None or not len(mine) == len(theirs) == 2 or attribute == "style" and self.is_creature_noun(mine[0]):
            return False
        if self._kin(mine[1], theirs[1]):
            other = 0
        elif attribute == "subject" and norm(mine[0]) == norm(theirs[0]) and not self._one_thing(phrase, label):
            other = 1
        else:
            return False
        if self.cue_words.get(norm(mine[other]), set()) & self.terms[attribute].get(term_key(label), set()):
            return False
        return self._other_noun(mine[other], theirs[other])

    def _one_thing(self, phrase: str, label: str) -> bool:
        """Whether MiniLM puts two names nearly as one (two words for one appliance, not a man and a house)."""
        if self.embedder is None:
            return False
        vectors = self.embedder.embed([phrase, label])
        return float(vectors[0] @ vectors[1]) >= ONE_THING_FLOOR

    def _kin(self, word: str, other: str) -> bool:
        """Whether two words name one thing: the same word, a shared WordNet sense, or one a kind of the other."""
        if norm(word) == norm(other) or _one_stem(word, other):
            return True
        lex = self.lexicon
        mine, theirs = set(lex.senses(word)), set(lex.senses(other))
        return bool(mine & theirs) or any(a in lex.ancestors(b, LEXICON_MAX_UP) or b in lex.ancestors(a, LEXICON_MAX_UP) for a in mine for b in theirs)

    def _other_noun(self, word: str, other: str) -> bool:
        """Whether both words are mainly nouns that WordNet knows apart, neither a kind of the other."""
        return self.lexicon.is_mainly_noun(word) and self.lexicon.is_mainly_noun(other) and self._nouns_apart(word, other) \
            and not self._kin(word, other)

    def names_art_style(self, word: str) -> bool:
        """Whether WordNet knows the word as an artistic movement or style; without WordNet none is."""
        return self.lexicon is not None and self.lexicon.names_art_style(word.replace(" ", "_"))

    def names_medium(self, word: str) -> bool:
        """Whether an unknown word names a medium in any sense ("oils", "charcoal"); without WordNet none does."""
        return self.lexicon is not None and self.lexicon.names_medium(word)

    def names_place(self, word: str) -> bool:
        """Whether an unknown word names a place or weather (a setting); without WordNet none does."""
        return self.lexicon is not None and self.lexicon.names_place(word)

    def names_container(self, word: str) -> bool:
        """Whether an unknown word usually names a container; without WordNet none does."""
        return self.lexicon is not None and self.lexicon.names_container(word)

    def usually_names_place(self, word: str) -> bool:
        """Whether the word's usual sense is a place or weather ("ocean", "snow"); without WordNet none is."""
        return self.lexicon is not None and self.lexicon.usually_names_place(word)

    def names_built_place(self, word: str) -> bool:
        """Whether a word names a place people made ("mine", "mill"); without WordNet none does."""
        return self.lexicon is not None and self.lexicon.names_built_place(word)

    def is_verb(self, word: str) -> bool:
        """Whether WordNet knows the word as a verb; without WordNet none is."""
        return self.lexicon is not None and self.lexicon.is_verb(word)

    def is_mainly_noun(self, word: str) -> bool:
        """Whether WordNet knows the word mostly as a noun ("gingerbread", not "red" or "hunting"); without WordNet none is."""
        return self.lexicon is not None and self.lexicon.is_mainly_noun(word)

    def is_noun(self, word: str) -> bool:
        """Whether WordNet knows the word as a noun; without WordNet every word may be one."""
        return self.lexicon is None or bool(self.lexicon.senses(word))

    def names_material_or_kind(self, word: str) -> bool:
        """Whether an unknown word before the subject ("neon toy", "glass chair") names what it is
        made of or a kind of it: a noun more than an adjective ("cute", "fluffy" are looks for the
        prompt) whose usual sense is a physical thing ("party" and "family" are no material), no
        creature ("pet") and usually no place ("street"; "corduroy" is a fabric, though a log road too).
        Without WordNet none does."""
        lex = self.lexicon
        return (lex is not None and len(word) > 2 and lex.is_mainly_noun(word) and lex.names_physical(word)
                and not lex.names_creature(word) and not lex.usually_names_place(word))

    def _compound(self, phrase: str) -> str | None:
        """The WordNet noun a phrase of several words is ("tape_recorder", "wineglass" for "wine glass"), if any."""
        if self.lexicon is None:
            return None
        return next((word for word in (phrase.replace(" ", "_"), phrase.replace(" ", "")) if self.lexicon.senses(word)), None)

    def is_open_compound(self, phrase: str) -> bool:
        """Whether WordNet knows a phrase, written apart, as one common noun ("full moon"; not "the hill",
        a name of the Capitol, nor "me w" run together as "mew")."""
        return self.lexicon is not None and bool(self.lexicon.usual_senses(phrase.replace(" ", "_")))

    def is_compound(self, phrase: str) -> bool:
        """Whether WordNet knows a phrase of several words as one noun; without WordNet none is."""
        return self._compound(phrase) is not None

    def names_matter(self, word: str) -> bool:
        """Whether the word's usual sense is matter, what things are made of ("paper", "wood"); without WordNet none is."""
        return self.lexicon is not None and self.lexicon.names_matter(word)

    def names_compound_matter(self, phrase: str) -> bool:
        """Whether a phrase of several words is one WordNet noun for a material ("cast iron")."""
        word = self._compound(phrase)
        return word is not None and self.lexicon.names_matter(word)

    def names_compound_thing(self, phrase: str) -> bool:
        """Whether a phrase is one WordNet noun for a drawable thing, neither a place nor a medium
        ("wine glass", not "stone pit" or "oil paint")."""
        word = self._compound(phrase)
        return word is not None and self.lexicon.names_thing(word) and not self.lexicon.names_place(word) \
            and not self.lexicon.names_medium(word)

    def shades_of(self, word: str) -> frozenset[str]:
        """The description words that name a shade of a colour word the descriptions lack ("navy" for
        blue): WordNet files each shade under its colour."""
        colours = self.lexicon.colour_senses(word) if self.lexicon is not None and word not in self.cue_words else set()
        if not colours:
            return frozenset()
        if self._shades is None:
            self._shades = {w: set().union(*(self.lexicon.ancestors(o, SHADE_MAX_UP) for o in shades))
                            for w in self.cue_words if (shades := self.lexicon.colour_senses(w))}
        return frozenset(w for w, above in self._shades.items() if colours & above)

    def is_above(self, word: str, attribute: str, key: tuple[str, ...]) -> bool:
        """Whether a sense of the word is at most PLACE_ABOVE_MAX_UP hypernym steps above a sense of the
        term: "weather" above snow; without WordNet none is."""
        if self.lexicon is None:
            return False
        senses = set(self.lexicon.senses(word))
        label = self.labels.get((attribute, key), " ".join(key)).replace(" ", "_")
        return any(senses & self.lexicon.ancestors(o, PLACE_ABOVE_MAX_UP).keys() for o in self.lexicon.senses(label))

    def names_in_any_sense(self, word: str, label: str) -> bool:
        """Whether a sense of the word, rare ones too, is a sense of the label or at most OPTION_MAX_UP
        hypernym steps above one ("machine" for a car, "animal" for a wild ox, a word for musical
        instruments, five steps above a kind of woodwind); without WordNet none is. Only the few options
        a question offered are weighed, so a broad word may name one of them."""
        if self.lexicon is None:
            return False
        senses = set(self.lexicon.senses(word))
        return bool(senses) and any(senses & self.lexicon.ancestors(o, OPTION_MAX_UP).keys()
                                    for o in self.lexicon.senses(label.replace(" ", "_")))

    def files_apart(self, word: str, label: str) -> bool:
        """Whether WordNet tells the label from what the word names: the word names a narrow kind
        (fewer than GENERAL_WORD_KINDS kinds below it) and WordNet knows the label but not under the
        word, so a macaque is no walrus and a painting no giraffe. A broad word's tree leaves out what
        people call by it (a frigate is no "boat" there, an azalea no "flower"), so it tells nothing
        apart. Without WordNet nothing is told apart."""
        lex = self.lexicon
        if lex is None or self.names_in_any_sense(word, label) or not lex.senses(label.replace(" ", "_").replace("-", "_")):
            return False
        return all(lex.kinds_below(o, GENERAL_WORD_KINDS) < GENERAL_WORD_KINDS for o in lex.usual_senses(word))

    def part_of_a_term(self, word: str, ids: Collection[str]) -> bool:
        """Whether the word starts or ends a one-word term of these checkpoints ("wrist" of wristwatch,
        "scraper" of skyscraper): among the few offered checkpoints, a part of the compound names it."""
        ids = set(ids)
        return len(word) >= 4 and any(
            key[0] != word and (key[0].startswith(word) or key[0].endswith(word))
            for attribute in self.ATTRIBUTES for key, matching in self.terms[attribute].items() if len(key) == 1 and matching & ids)

    def names_colour(self, word: str) -> bool:
        """Whether an unknown word names a colour; without WordNet none does."""
        return self.lexicon is not None and self.lexicon.names_colour(word)

    def looks_like_style(self, phrase: str) -> bool:
        """Whether an unknown word or phrase reads as a way of making pictures ("graffiti", "anime",
        "pointillism") by meaning: its bare embedding is near a description of what a style is. Without
        an embedder, WordNet's art forms alone decide."""
        if phrase not in self._style_cache:  # like `similar`: one embedding per phrase per catalog revision
            self._style_cache[phrase] = self.names_art_form(phrase.replace(" ", "_")) or self._near_style_anchor(phrase)
        return self._style_cache[phrase]

    def names_unknown(self, word: str, shown_a_thing: bool = False) -> bool:
        """Whether a word may be the name of a craft, brand or thing the catalog lacks ("a kendama"),
        or a misspelling of one ("elefant"): WordNet knows no form of it (or knows it only as a
        trade name or a city), it is no chat
        shorthand ("idc": those are short), no "-y" slang made from a word ("trippy"), no word with
        its final "g" dropped ("somethin"), and no misspelling of a catalog word too far gone to
        correct ("gwache") or of a long word of the request grammar ("whatevr", "whichevs"; a
        misspelling keeps about the word's length and its first letter: three letters more, or
        another first letter, make another word).
        A short word counts where its phrase shows it to be a thing (`shown_a_thing`). Without WordNet no word is."""
        if self.lexicon is None or len(word) < (SHORT_NAME_LENGTH if shown_a_thing else UNKNOWN_NAME_MIN_LENGTH) \
                or self.lexicon.is_word(word) and not self.lexicon.names_only_a_name(word):
            return False
        if word.endswith("y") and any(self.lexicon.is_word(stem) for stem in (word[:-1], word[:-2]) if len(stem) >= 3):
            return False
        if word.endswith("in") and (word + "g" in STOP_WORDS or self.lexicon.is_word(word + "g")):
            return False
        return not any(abs(len(word) - len(part)) <= MISSPELLING_LENGTH_GAP and part[0] == word[0]
                       and difflib.SequenceMatcher(None, word, part).ratio() >= MISSPELLING_RATIO
                       for part in itertools.chain((part for _, key in self._term_list for part in key), _LONG_STOP_WORDS))

    def _near_style_anchor(self, phrase: str) -> bool:
        if self.embedder is None:
            return False
        if self._style_anchors is None:
            self._style_anchors = self.embedder.embed(list(STYLE_ANCHORS))
        return float(np.max(self._style_anchors @ self.embedder.embed([phrase])[0])) >= STYLE_LIKE_FLOOR

    def correct(self, text: str, grammar_words: frozenset[str]) -> str:
        """`text` with typos of the catalog's words (and of the request grammar's) corrected."""
        speller = self._spellers.get(grammar_words)
        if speller is None:
            terms = {part for table in self.terms.values() for key in table for part in key}
            speller = self._spellers[grammar_words] = Speller(terms | set(self.cue_words) | grammar_words, STOP_WORDS,
                                                              self.lexicon.is_word if self.lexicon else None,
                                                              weak=set(self.cue_words) - terms - grammar_words)
        return speller.correct(text)

    def _places_in_descriptions(self, described_keys: dict[str, list[str]]) -> None:
        """A card whose description sets it in a place another card lists as its environment ("in the
        snow") has that place too: the environment field often names fewer places than the text."""
        places = self.terms["environment"]
        longest = max(map(len, places), default=0)
        for card_id, keys in described_keys.items():
            for size in range(1, longest + 1):
                for i in range(len(keys) - size + 1):
                    key = tuple(keys[i:i + size])
                    if key in places:
                        places[key].add(card_id)

    def _survey_shades_in_descriptions(self, described_keys: dict[str, list[str]]) -> None:
        """A card that writes a shade before its subject or a material ("a plum dog", "in plum felt")
        is that shade's basic colour too, as the XKCD colour survey files it (`_survey_shade_of`): a
        user may call it purple. Only a shade WordNet knows neither as a colour of its own nor usually
        as a place; elsewhere ("a plum tree") the word is a thing."""
        lex = self.lexicon
        if lex is None:
            return
        for card_id, keys in described_keys.items():
            for shade, after in zip(keys, keys[1:]):
                colour = _survey_shade_of(shade, BASIC_COLOURS)
                if colour and (after in self.subject_words or lex.names_matter(after)) and not lex.colour_senses(shade) \
                        and not any(PLACES & lex.ancestors(o, 20).keys() for o in lex.usual_senses(shade)):
                    if colour not in self.cue_words:  # no card writes the colour itself
                        self.shade_only_colours.add(colour)
                    self.cue_words[colour].add(card_id)

    def _drop_common_cues(self, card_count: int) -> None:
        """A description word most cards share ("samples", "trained") tells no checkpoint apart, so
        it never becomes a filter: the catalog's own document frequency decides, not a word list."""
        if card_count >= COMMON_MIN_CARDS:
            for word in [w for w, ids in self.cue_words.items() if len(ids) > COMMON_SHARE * card_count]:
                del self.cue_words[word]

    def exact(self, key: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
        for attribute in self.ATTRIBUTES:
            if key in self.terms[attribute]:
                return attribute, key
        return None

    def similar(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        """The vocabulary term an unknown word or phrase stands for, if any is close enough, with a
        strength: a spelling match (>= 0.8) beats a meaning match (cosine above its floor, < 0.3);
        WordNet (0.07-0.1) places a subject the embedder cannot, and widens the embedder's sub-type
        to its category when the word is broader. A style described in the words of its WordNet
        definition (0.04) is read before the embedder, which would place it by sound alone."""
        if phrase in self._word_cache:
            return self._word_cache[phrase]
        closed = self._closed_forms.get((phrase,))
        found = (*closed, 1.0) if closed else (self._by_spelling(phrase) or self._style_by_definition(phrase) or self._styles_made_by(phrase)
                                               or self._by_defined_modifier(phrase))
        if found is None:
            found = self._by_meaning(phrase)
            if found is None or (found[0] == "subject" and found[1] not in self.categories):
                lexical = self._by_lexicon(phrase) or self._style_or_place_by_lexicon(phrase)
                if found is None:
                    found = lexical
                elif lexical is not None and lexical[1] in self.categories and self.term_categories[found[1]] == {lexical[1]}:
                    # A word broader than the sub-type the embedder saw ("seat" for "stool") names the category.
                    found = ("subject", lexical[1], found[2])
        if found is not None and found[0] == "subject" and self._outside_category(phrase, found[1]):
            found = None
        if found is None:
            found = self._categories_below(phrase) or self._by_head_noun(phrase) or self._by_first_word(phrase)
        if not closed and found is not None and found[0] == "subject" and self._filed_elsewhere(phrase, found[1]):
            found = None
        if found is None and self.lexicon is not None and (noun := self.lexicon.pet_form_of(phrase)):
            found = self.similar(noun)  # a pet form names what its noun names
            found = found if found is not None and found[0] == "subject" else None
        self._word_cache[phrase] = found
        return found

    def _filed_elsewhere(self, phrase: str, key: tuple[str, ...]) -> bool:
        """A word WordNet knows names no subject whose cards go by other names WordNet knows, each a
        sibling of the word (`_siblings`), whatever MiniLM or a shared head noun says: a "lynx" is no
        gopher, though its cards also call it a marsh lynx. With no such other name, a word of the
        subject's name names it ("letter" for a love letter)."""
        if self.lexicon is None or not self.lexicon.usual_senses(phrase.replace(" ", "_")):  # a compound WordNet knows too
            return False
        ids = self.terms["subject"].get(key, set())
        labels = {self.labels[("subject", k)] for k, other in self.terms["subject"].items() if other & ids}
        known = [label for label in labels
                 if phrase not in label.split() and self.lexicon.senses(label.replace(" ", "_").replace("-", "_"))]
        return bool(known) and all(self._siblings(phrase, label, "subject") for label in known)

    def _outside_category(self, phrase: str, key: tuple[str, ...]) -> bool:
        """A sub-type broader than its category ("vehicle" on cards of cars) takes a word only if the
        word is a kind of the category too, or a synonym of the sub-type itself: a submarine is a
        vehicle, yet no car."""
        lex = self.lexicon
        if lex is None or key in self.categories:
            return False
        usual = lex.usual_senses(phrase)
        if not usual:
            return False
        term_senses = set(lex.senses(self.labels[("subject", key)]))
        if term_senses.intersection(usual):  # "automobile" is the very "motorcar" the cards list
            return False
        category_senses = {o for c in self.term_categories[key] for o in lex.senses(self.labels.get(("subject", c), " ".join(c)))}
        if not any(term_senses & lex.ancestors(o, LEXICON_SENSE_DEPTH).keys() for o in category_senses):
            return False
        reach = set().union(*(lex.ancestors(o, LEXICON_SENSE_DEPTH + LEXICON_MAX_UP).keys() for o in usual))
        return not reach & category_senses

    def _by_spelling(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        """Style and place spelling variants and derived forms: "watercolour", "cartoony", "photorealistic", "toon", "knit".
        A word that holds a term's word yet is a noun of its own is no form of it."""
        if len(phrase) < 4:
            return None
        best, best_ratio, whole = None, SPELLING_MIN_RATIO, []
        for attribute, key in self._term_list:
            if attribute == "subject":  # "cat" is not "tabby cat": subjects go by meaning only
                continue
            label = " ".join(key)
            if self._other_kind(phrase, label, attribute):
                continue
            contained = any(len(part) >= 5 and len(phrase) - len(part) <= 5 and (phrase.startswith(part) or phrase.endswith(part))
                            and not (self.lexicon is not None and self._nouns_apart(phrase, part)) for part in key)  # "watercolor": no water
            clipped = " " not in phrase and any(part.endswith(phrase) and len(part) - len(phrase) <= 3 for part in key)
            # "pixel" for pixel art: the style less the kind of art it ends in
            unnamed_kind = len(key) > 1 and " ".join(key[:-1]) == phrase and (key[-1] == "art" or self.names_art_form(key[-1]))
            # "knit" for knitted lace: the verb a participle of a longer style stands for
            participle = attribute == "style" and len(key) > 1 and any(part.endswith("ed") and phrase in verb_stems(part) for part in key)
            if contained or clipped or unnamed_kind or participle or _one_stem(phrase, "".join(key)) \
                    or attribute == "environment" and self._first_of_compound(phrase, key):
                ratio = 1.0
            elif len(phrase) >= 5:
                ratio = difflib.SequenceMatcher(None, phrase, label).ratio()
                if ratio >= best_ratio and self._distinct_nouns(phrase, label):  # WordNet asked only of a match that would win
                    continue
            else:
                continue
            if ratio > best_ratio or (best is None and ratio >= best_ratio):
                best, best_ratio = (attribute, key, ratio), ratio
                whole = [key] if ratio == 1.0 else []
            elif ratio == 1.0 == best_ratio and attribute == best[0]:
                whole.append(key)
        if best is not None and len(whole) > 1:  # a word that ends two places' names alike ("lake" of two kinds of lake): either
            return best[0], frozenset(whole), 1.0
        return best

    def _distinct_nouns(self, phrase: str, label: str) -> bool:
        """Whether WordNet knows both as nouns of no shared sense that differ from their first letters:
        two art movements one letter apart are no spellings of each other, while "watercolour" is one of
        "watercolor" and "oil paint" a form of "oil painting" (derived forms differ at their ends)."""
        if self.lexicon is None or len(os.path.commonprefix([phrase, label])) >= SPELLING_SHARED_START:
            return False
        return self._nouns_apart(phrase, label)

    def _nouns_apart(self, phrase: str, other: str) -> bool:
        """Whether WordNet knows both as nouns and no sense is one of both."""
        mine, theirs = set(self.lexicon.senses(phrase.replace(" ", "_"))), set(self.lexicon.senses(other.replace(" ", "_")))
        return bool(mine) and bool(theirs) and not mine & theirs

    def _first_of_compound(self, phrase: str, key: tuple[str, ...]) -> bool:
        """Whether a place term is one closed compound starting with the word, its rest a noun of its
        own, and the word usually a place itself: "by the lake" for a "lakeside", while "wood", usually
        a material, is no "woodland"."""
        return self.lexicon is not None and len(key) == 1 and key[0].startswith(phrase) and len(key[0]) - len(phrase) >= 3 \
            and self.lexicon.usually_names_place(phrase) and self.lexicon.is_word(key[0][len(phrase):])

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
            if attribute == "subject":
                near: list[tuple[str, ...]] = []
                for i in np.argsort(-scores):
                    near += [c for c in sorted(self.term_categories[keys[int(i)]]) if c not in near]
                    if len(near) >= LEXICON_NEAR_CATEGORIES:
                        break
                self._near_categories[phrase] = set(near[:LEXICON_NEAR_CATEGORIES])
            top = int(np.argmax(scores))
            margin = float(scores[top]) - MEANING_FLOORS[attribute]
            if margin < best_margin or float(self._bare_vectors[attribute][top] @ bare) < BARE_MEANING_FLOOR:
                continue
            key = keys[top]
            if self._siblings(phrase, self.labels[(attribute, key)], attribute):
                continue
            if attribute == "subject" and self._compound_named_apart(phrase, self.labels[(attribute, key)]):
                continue
            if attribute == "style" and self.names_art_itself(phrase.replace(" ", "_")):
                continue  # "art", "drawing", "needlework" name a whole kind of art, no one style of it
            if attribute != "subject" and self.is_creature_noun(phrase):
                continue  # a creature ("a parrot") is something to draw, never a look or a place however MiniLM hears it
            if attribute == "subject" and key not in self.categories:
                # An ordinary word is usually the general noun: prefer the category when it scores nearly as well.
                for i in np.argsort(-scores)[1:6]:
                    if keys[int(i)] in self.categories and scores[i] >= scores[top] - 0.08:
                        key = keys[int(i)]
                        break
            best, best_margin = (attribute, key, margin), margin
        return best

    def _siblings(self, phrase: str, label: str, attribute: str) -> bool:
        """Whether WordNet knows both as nouns and neither as the other or a kind of it: the ocean is no
        beach and anime no cartoon, though MiniLM puts each pair as near as sea and shore. Adjectives
        and phrases WordNet lacks as nouns ("lifelike", "polygonal") are left to the embedder.

        A subject is turned down when some sense of the word and of the term are kinds of one same
        thing, two steps up at most (a wolf and a dog are both canines, a donkey an ass and so an
        equine like a horse), and no sense links them. WordNet files many a synonym far apart
        ("kitten" under young mammals, "human" under hominids), so two words it files apart are
        turned down only when neither definition names the other either ("a young domestic cat"
        names the cat, so a kitten is one; of two near things whose definitions name neither, the
        embedder's nearness is no evidence).

        A place is no sibling of a kind of its own direct hypernym whose definition shares a word with
        its own beyond that genus: the seaside ("the shore of a sea") is a seashore, a kind of shore,
        and shore and beach ("sand sloping down to the water of a sea") are both WordNet's geological
        formations; the ocean is a body of water, and two buildings for different uses share only
        "building"."""
        if self._other_kind(phrase, label, attribute):
            return True
        lex = self.lexicon
        if lex is None:
            return False
        subject = attribute == "subject"
        word = phrase.replace(" ", "_")
        mine = lex.senses(word) if subject else lex.usual_senses(word) or lex.senses(word)  # a capitalised name has no usual sense
        theirs = lex.senses(label.replace(" ", "_"))
        headed = not theirs and attribute == "style" and label.count(" ") == 1
        if headed:  # a two-word style WordNet lacks is a kind of its head noun, and another kind of it no spelling of it
            theirs = lex.senses(label.split()[1])
        if not mine or not theirs:
            return False
        reach = LEXICON_MAX_UP
        # a sense of both must be the word's usual one or the term's own: two animals are no synonyms for
        # the one meat WordNet names after both, while a rarer sense of a word may be the term's very own
        shared = set(lex.usual_senses(word) or mine) | set(self._own_senses(label)) if subject else set(mine)
        if any(a in shared if a == b else a in lex.ancestors(b, reach) or not headed and b in lex.ancestors(a, reach)
               for a in mine for b in theirs):
            return False
        if attribute == "environment" and any(self._defined_alike(a, b) for a in mine for b in theirs):
            return False
        if not subject or any(lex.ancestors(a, SIBLING_UP).keys() & lex.ancestors(b, SIBLING_UP).keys() for a in mine for b in theirs):
            return True
        defined = {o: {norm(w) for w in lex.defined_words(o)} for o in (*mine, *theirs)}  # once per sense, not per pair
        return not any(lex.lemma_heads(b) & defined[a] or lex.lemma_heads(a) & defined[b] for a in mine for b in theirs)

    def _compound_named_apart(self, phrase: str, label: str) -> bool:
        """Whether a compound WordNet lacks (one word or two) is two nouns, and the term's name holds none
        of its first nouns: it names a kind of thing of its own, however near MiniLM puts the two
        (strangers refused such near neighbours, each a kind of its own), while a compound sharing its
        first noun with the term's name may be another name of it."""
        lex = self.lexicon
        if lex is None or lex.senses(phrase.replace(" ", "_")):
            return False
        parts = phrase.split()
        splits = [parts] if len(parts) == 2 else [[phrase[:k], phrase[k:]] for k in range(3, len(phrase) - 2)] if len(parts) == 1 else []
        firsts = [first for first, head in splits
                  if lex.is_mainly_noun(first) and lex.is_mainly_noun(head) and not head.endswith("ing")]
        return bool(firsts) and not any(first in label.replace(" ", "") for first in firsts)

    def _defined_alike(self, sense: int, term_sense: int) -> bool:
        """Whether a sense is a kind of the term sense's direct hypernym (at most LEXICON_MAX_UP steps
        down) and the two definitions share a content word that does not name that hypernym."""
        lex = self.lexicon
        genus = set(lex.synset(term_sense).hypernyms) & lex.ancestors(sense, LEXICON_MAX_UP).keys()
        if not genus:
            return False
        named = set().union(*map(lex.lemma_words, genus))
        shared = lex.defined_words(sense) & lex.defined_words(term_sense)
        return any(w not in STOP_WORDS and len(w) >= 3 and w not in named for w in shared)

    def _lexicon_index(self) -> dict[int, set[tuple[str, ...]]]:
        """The WordNet senses of the catalog's subject terms, each term's senses chosen by its own cards."""
        if self._sense_terms is not None:
            return self._sense_terms
        lex = self.lexicon
        senses = {key: self._own_senses(self.labels[("subject", key)]) for key in self.terms["subject"]}
        related: dict[tuple[str, ...], set[tuple[str, ...]]] = defaultdict(set)  # category <-> its sub-types
        for key, categories in self.term_categories.items():
            for category in categories - {key}:
                related[key].add(category)
                related[category].add(key)
        below = {o: lex.ancestors(o, LEXICON_SENSE_DEPTH) for offsets in senses.values() for o in offsets}
        sense_terms: dict[int, set[tuple[str, ...]]] = defaultdict(set)
        for key, offsets in senses.items():
            agreed = [o for o in offsets if any(
                o in below[p] or p in below[o] for other in related[key] for p in senses[other])]
            for o in agreed or offsets:
                sense_terms[o].add(key)
                for parent in lex.synset(o).hypernyms:
                    self._parent_terms.setdefault(parent, set()).add(key)
        self._sense_terms = sense_terms
        return sense_terms

    def with_kinds_below(self, key: tuple[str, ...]) -> tuple[str, ...] | frozenset:
        """A subject term no card has as its category, with the catalog's subjects WordNet files at most
        LEXICON_MAX_UP steps below the term's usual sense (a frozenset of alternatives), else the term:
        a broad word some cards list beside their own subject also names a narrower subject's cards, as
        users who type it mean (strangers asked for the one card of a narrower subject by the broad word
        other cards list). A category keeps its own cards: its name is the catalog's own word for them;
        and names of kinds within the term's own category stay apart (the catalog tells them apart)."""
        if self.lexicon is None or key in self.categories:
            return key
        if self._terms_below is None:
            self._terms_below = defaultdict(set)
            for sense, keys in self._lexicon_index().items():
                for above in self.lexicon.ancestors(sense, LEXICON_MAX_UP):
                    self._terms_below[above] |= keys
        below = set().union(*(self._terms_below.get(sense, set())
                              for sense in self.lexicon.usual_senses(self.labels[("subject", key)].replace(" ", "_"))))
        own = self.terms["subject"].get(key, set())
        below = {other for other in below if not self.term_categories[other] & self.term_categories[key]}  # its own category's names stay apart
        return frozenset(below | {key}) if any(self.terms["subject"][other] - own for other in below) else key

    def _own_senses(self, label: str) -> tuple[int, ...]:
        """A term's senses, less those where it is only another name of a thing with a name of its own
        while some sense is its own: a "cat" is WordNet's true cat, and only in slang a guy, which a
        user names as such. Where every own sense is a human, every sense that is none stays too: a
        "digger" on a card is the machine, not the laborer. (An animal's other senses stay out: WordNet
        may give its name to another animal, which no user means.)"""
        lex = self.lexicon
        word = label.replace(" ", "_")
        senses = lex.senses(word)
        heads = tuple(o for o in senses if lex.synset(o).lemmas[0] == word)  # not a capitalised name (a novel's character)
        if not heads:
            return senses
        if all(PERSON in lex.ancestors(o, 20) for o in heads):
            return heads + tuple(o for o in senses if PERSON not in lex.ancestors(o, 20))
        return heads

    def _style_or_place_by_lexicon(self, phrase: str) -> tuple[str, object, float] | None:
        """The style or place terms WordNet links a word to, which the embedder did not place: one that
        shares a sense with it ("underground" and "metro" are one synset); for a place, one that a
        sense of the word is a direct kind of (in one sense a chapel is a church), or whose direct
        hypernym is a sense of the word ("land" for a forest). The first attribute with a link wins;
        several terms are a frozenset, any of which fits. A kind of art is never read as broader: one
        kind of painting may be WordNet's hypernym of another, yet a user who names it asks for it. A
        word for no kind of art is read so, as it can only describe the style: an "inlay" (a
        decoration) for the one style WordNet files as a kind of inlay."""
        if self.lexicon is None:
            return None
        lex = self.lexicon
        word = phrase.replace(" ", "_")
        usual, every = set(lex.usual_senses(word)), set(lex.senses(word))
        kinds = every | {h for o in every for h in lex.synset(o).hypernyms}
        describes = set() if any(ART_FORMS & lex.ancestors(o, 12).keys() for o in usual) else usual  # "art" itself too
        for attribute in ("style", "environment"):
            same, broader = set(), set()
            for key in self.terms[attribute]:
                theirs, parents = self._term_sense_table()[(attribute, key)]
                if theirs & (usual if attribute == "style" else kinds):
                    same.add(key)
                elif (every if attribute == "environment" else describes) & parents:
                    broader.add(key)
            keys = same or broader
            if keys:
                return attribute, next(iter(keys)) if len(keys) == 1 else frozenset(keys), LEXICON_STRENGTH
        return None

    def _style_by_definition(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        """The one style whose WordNet definition holds every word of a phrase that describes it
        instead of naming it: "soluble pigment" (a watercolor: "a water-base paint (with water-soluble
        pigments)"). A phrase's words may also come from the definition of the style's genus ("wood
        inlay" for a style WordNet files as a kind of inlay, "pieces of wood fitted into slots"), and
        may end a compound there ("wax" of "beeswax"). A single word counts only as a verb's past
        participle written in the definition ("carved", "dyed", "inlaid"), or one whose verb's noun is
        defined by naming the style ("stitched"): a lone
        noun or adjective ("wax", "small") is in too many definitions to name one, and a participle of
        another form ("painted" for "painting") may be said of any painting.
        Only senses that are things or kinds of art are read: a style's name may also be a disease."""
        lex = self.lexicon
        words = [w for w in phrase.split() if w not in STOP_WORDS and len(w) >= 3]
        if lex is None or not words or not self.terms["style"]:
            return None
        word = words[0]
        if len(words) == 1 and (lex.senses(word) or not lex.past_form_verbs(word)):
            return None
        if self._style_definitions is None:  # once per catalog revision: each sense's words, and in any form those and its genus's
            self._style_definitions = {
                key: [(defined, {f for w in defined | self._genus_words(o) for f in word_forms(w)})
                      for o in lex.senses(self.labels[("style", key)].replace(" ", "_"))
                      if PHYSICAL_ENTITY in (above := lex.ancestors(o, 20)) or ART_FORMS & above.keys()
                      for defined in (lex.defined_words(o),)]
                for key in self.terms["style"]}

        def in_forms(w: str, forms: set[str]) -> bool:  # in any form ("folding": fold), or ending a compound ("wax": beeswax)
            return bool(word_forms(w) & forms) or any(f.endswith(w) and len(f) - len(w) >= 3 for f in forms)

        def described(defined: frozenset[str], forms: set[str]) -> bool:  # a lone participle as written, or each word
            return word in defined if len(words) == 1 else all(in_forms(w, forms) for w in words)

        styles = [key for key, definitions in self._style_definitions.items() if any(described(*d) for d in definitions)]
        if not styles and len(words) == 1:  # "stitched": WordNet defines a stitch by the crafts it is made in, the style among them
            defined = set().union(*(lex.defined_words(o) for verb in lex.past_form_verbs(word) for o in lex.senses(verb)))
            styles = [key for key in self.terms["style"] if len(key) == 1 and key[0] in defined]
        return ("style", styles[0], DEFINITION_STRENGTH) if len(styles) == 1 else None

    def _styles_made_by(self, word: str) -> tuple[str, object, float] | None:
        """The styles a past participle says a thing was made in: those whose last word is its verb
        or the verb's "-ing" noun. "Knitted" is a cable knit; "carved", where two styles end in
        "carving", is either of them."""
        if self.lexicon is None or " " in word:
            return None
        verbs = set(self.lexicon.past_form_verbs(word))
        styles = frozenset(key for key in self.terms["style"]
                           if key[-1] in verbs or key[-1].endswith("ing") and verbs.intersection(verb_stems(key[-1])))
        if not styles:
            return None
        return "style", next(iter(styles)) if len(styles) == 1 else styles, DEFINITION_STRENGTH

    def _by_defined_modifier(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        """The one two-word place or style whose head the phrase shares and whose first word WordNet
        defines by the phrase's first ("pebble beach" for the beach of a word WordNet defines as "coarse
        beach gravel of pebbles")."""
        words = phrase.split()
        if self.lexicon is None or len(words) != 2:
            return None
        first, head = norm(words[0]), norm(words[1])
        hits = [(attribute, key) for attribute, key in self._term_list if attribute != "subject" and len(key) == 2 and key[1] == head
                and key[0] != first and first in {norm(w) for o in self.lexicon.senses(key[0]) for w in self.lexicon.defined_words(o)}]
        return (*hits[0], DEFINITION_STRENGTH) if len(hits) == 1 else None

    def names_making_in_art_form(self, word: str) -> bool:
        """Whether a past participle says a thing was made in a kind of art, named by its verb's "-ing"
        noun: "knitted" (knitting), "carved" (carving)."""
        verbs = self.lexicon.past_form_verbs(word) if self.lexicon is not None else []
        return any(self.names_art_form(form) for verb in verbs for form in (f"{verb}ing", f"{verb[:-1]}ing", f"{verb}{verb[-1]}ing"))

    def _genus_words(self, sense: int) -> set[str]:
        """The names and definition words of a sense's direct hypernyms: "inlay", "wood", "fitting"."""
        lex = self.lexicon
        genus = lex.synset(sense).hypernyms
        return set().union(*(lex.lemma_words(g) | lex.defined_words(g) for g in genus))

    def describes_a_style(self, word: str) -> bool:
        """Whether a typed word reads as a catalog style by WordNet's definitions ("stitched", "dyed") or
        as the way a style is made ("knitted")."""
        return self._style_by_definition(word) is not None or self._styles_made_by(word) is not None

    def _term_sense_table(self) -> dict[tuple[str, tuple[str, ...]], tuple[set[int], set[int]]]:
        """(attribute, style or place term) -> its WordNet senses and their direct hypernyms, built once
        per catalog revision, not per word."""
        if self._term_senses is None:
            lex, self._term_senses = self.lexicon, {}
            for attribute in ("style", "environment"):
                for key in self.terms[attribute]:
                    theirs = set(lex.senses(self.labels[(attribute, key)].replace(" ", "_")))
                    if attribute == "environment":  # no place is a creature: "park" is also an explorer, who is no place
                        theirs = {o for o in theirs if ORGANISM not in lex.ancestors(o, 20)} or theirs
                    self._term_senses[(attribute, key)] = theirs, {h for o in theirs for h in lex.synset(o).hypernyms}
        return self._term_senses

    def place_named_alike(self, word: str) -> tuple[str, tuple[str, ...], float] | None:
        """The one catalog place whose sense the word's usual sense is: "loft" is one synset with
        "garret", so "in the loft" is in the garret even where a description says "loft bed"."""
        if self.lexicon is None or self.exact((word,)):
            return None
        usual = set(self.lexicon.usual_senses(word))
        places = [key for (attribute, key), (theirs, _) in self._term_sense_table().items() if attribute == "environment" and theirs & usual]
        return ("environment", places[0], LEXICON_STRENGTH) if len(places) == 1 else None

    def place_made_of(self, word: str) -> tuple[str, tuple[str, ...], float] | None:
        """The one catalog place WordNet defines as made of the word: a beach is "an area of sand sloping
        down to the water", so "on the sand" is on the beach. Only a bare noun right after "of" is what a
        place is made of, and only a word whose usual sense is matter: a cellar is "the lowermost portion
        of a structure", yet "in the structure" is not in the cellar."""
        lex = self.lexicon
        if lex is None or not lex.names_matter(word):
            return None
        if self._place_matter is None:  # once per catalog revision
            self._place_matter = defaultdict(set)
            for key in self.terms["environment"]:
                for o in lex.senses(self.labels[("environment", key)].replace(" ", "_")):
                    if PLACES & lex.ancestors(o, 20).keys():
                        for matter in _MADE_OF.findall(lex.synset(o).definition.lower()):
                            self._place_matter[matter].add(key)
        places = set().union(*(self._place_matter.get(form, set()) for form in word_forms(word)))
        return ("environment", places.pop(), DEFINITION_STRENGTH) if len(places) == 1 else None

    def defined_with_genus(self, phrase: str) -> tuple[str, object, float] | None:
        """The one catalog place or description word that WordNet defines in the phrase's words, its
        last word the genus (a lemma of the sense's hypernym): a "feather pen" is a quill ("pen made
        from a bird's feather", a pen). Unlike a style's, a place's or a detail's definition alone has
        too many ordinary words to go by; the genus ties the phrase to one sense. Returns
        ("environment", key, strength) or ("cue", word, strength)."""
        lex = self.lexicon
        words = [w for w in phrase.split() if w not in STOP_WORDS and len(w) >= 3]
        if lex is None or len(words) < 2:
            return None
        if self._genus_of is None:  # once per catalog revision
            self._genus_of = defaultdict(list)
            named = [("environment", key, self.labels[("environment", key)]) for key in self.terms["environment"]]
            for attribute, value, label in named + [("cue", word, word) for word in self.cue_words]:
                for o in lex.senses(label.replace(" ", "_")):
                    forms = {f for w in lex.defined_words(o) for f in word_forms(w)}
                    for genus in {lemma.lower() for h in lex.synset(o).hypernyms for lemma in lex.synset(h).lemmas if "_" not in lemma}:
                        self._genus_of[genus].append((attribute, value, forms))
        *modifiers, head = words
        found = {(attribute, value) for form in word_forms(head) for attribute, value, forms in self._genus_of.get(form, ())
                 if all(word_forms(w) & forms for w in modifiers)}
        places = {hit for hit in found if hit[0] == "environment"}  # a place a description names is that place
        return (*(places or found).pop(), DEFINITION_STRENGTH) if len(places or found) == 1 else None

    def _categories_below(self, phrase: str) -> tuple[str, frozenset, float] | None:
        """"a watercolor animal", "any bird": a word whose usual sense is an ancestor of catalog
        subjects, more than the few steps a synonym is, names all their categories at once (a
        frozenset of category keys, which any of them meets). Only a drawable thing counts: "object"
        and "entity" are above everything."""
        lex = self.lexicon
        if lex is None or not self.terms["subject"] or not lex.names_thing(phrase):
            return None
        usual = set(lex.usual_senses(phrase))
        for sense in list(usual):  # "bug": "general term for any insect ...": every insect
            if m := _TERM_FOR.match(lex.synset(sense).definition):
                usual |= set(lex.usual_senses(norm(m.group(1))))
        if self._sense_ancestors is None:
            self._sense_ancestors = {o: lex.ancestors(o, HYPERNYM_MAX_DOWN) for o in self._lexicon_index()}
        categories = frozenset(c for sense, above in self._sense_ancestors.items() if usual & above.keys()
                               for key in self._sense_terms[sense]
                               if not (min(above[o] for o in usual if o in above) == 1 and self._animal_named_apart(usual, key))
                               for c in self.term_categories[key])
        return ("subject", categories, HYPERNYM_STRENGTH) if categories else None

    def names_kinds_of_subjects(self, word: str) -> bool:
        """Whether a word is broader than some of the catalog's subjects ("bird" where it has wrens)."""
        return self._categories_below(word) is not None

    def _by_head_noun(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        """A subject term of two words named by its last ("lion" for a mountain lion), where the terms it
        ends are of one category and WordNet files the compound beside or below the word, or does not
        know it: a sea lion is no lion."""
        lex, word = self.lexicon, norm(phrase)
        if lex is None or " " in phrase:
            return None
        keys = [key for key in self.terms["subject"] if len(key) == 2 and key[1] == word]
        categories = {c for key in keys for c in self.term_categories[key]}
        if len(categories) != 1:
            return None
        usual = set(lex.usual_senses(word))
        near = usual | {h for o in usual for h in lex.synset(o).hypernyms}
        for key in keys:
            senses = lex.senses("_".join(key))
            if senses and not any(near & lex.ancestors(o, 2).keys() for o in senses):
                return None
        key = keys[0] if len(keys) == 1 else next(iter(categories))
        return "subject", key, HEAD_NOUN_STRENGTH

    def _by_first_word(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        """The one two-word subject term a word starts, which nothing else placed ("rocking" for a
        rocking chair); a neighbour making another kind of it is checked where the words are read."""
        keys = [key for key in self.terms["subject"] if len(key) == 2 and key[0] == phrase]
        return ("subject", keys[0], HEAD_NOUN_STRENGTH) if len(keys) == 1 else None

    def _animal_named_apart(self, senses: set[int], key: tuple[str, ...]) -> bool:
        """Whether an animal term's name is not built on the word of `senses`, the group WordNet files it
        under one step up (the callers check the step): owners refuse a neighbour that WordNet files
        below the word they typed (a group word that holds other animals beside theirs), while a sea
        eagle is plainly an eagle, and words further up ("animal", "bird") name a whole group."""
        label = self.labels[("subject", key)]
        return self.lexicon.names_animal(label) and not any(label.endswith(w) for s in senses for w in self.lexicon.lemma_words(s))

    def _by_lexicon(self, phrase: str) -> tuple[str, tuple[str, ...], float] | None:
        """The subject term WordNet says a word names: the closest link, if it points into one category."""
        if self.lexicon is None or not self.terms["subject"]:
            return None
        sense_terms = self._lexicon_index()
        links: dict[tuple[str, ...], tuple[int, bool]] = {}  # term -> (steps, word broader than the term)
        for sense in self.lexicon.usual_senses(phrase):
            for offset, steps in self.lexicon.ancestors(sense, LEXICON_MAX_UP).items():
                for key in sense_terms.get(offset, ()):
                    if key not in links or steps < links[key][0]:
                        links[key] = (steps, False)
            for key in self._parent_terms.get(sense, ()):
                if (key not in links or 1 < links[key][0]) and not self._animal_named_apart({sense}, key):  # a parent: one step
                    links[key] = (1, True)
        if not links:
            return None
        steps = min(s for s, _ in links.values())
        closest = {key: broader for key, (s, broader) in links.items() if s == steps}
        categories = set().union(*(self.term_categories[key] for key in closest))
        if len(categories) != 1:
            return None  # "vehicle" for both the rockets and the bicycles: not this word's to decide
        category = next(iter(categories))
        if phrase in self._near_categories and category not in self._near_categories[phrase] and not (
                steps == 0 or all(closest.values()) and (self._categories_below(phrase) or (None, None))[1] == {category}):
            return None  # WordNet's usual sense of "tiger" is a fierce person; the embedder puts it by the cats
            # (a name of the term's own sense, or of the kind it is filed under with nothing else of the
            # catalog's below it, needs no embedder's word: "automobile" for a car, "canine" for a dog)
        if len(closest) == 1 and category not in closest and not any(closest.values()):
            key = next(iter(closest))  # a synonym or a kind of one sub-type: "grizzly" for grizzly bear
        else:
            key = category  # the category itself, or a word broader than its sub-types ("seat", "footwear")
        return "subject", key, LEXICON_STRENGTH - 0.01 * steps
