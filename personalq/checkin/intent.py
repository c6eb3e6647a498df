"""Intent parsing: the constraints a request puts on the checkpoint it means.

Time and version phrases are found first (they contain digits and order-like words), then the
catalog's own subject, style and place terms (longest first), then description words ("gray",
"beach"), then ordinary synonyms via the vocabulary's embedder. What is left is prompt context,
except a leftover that names a subject, a style or a setting the catalog lacks ("my giraffe", "a
fresco of the dog", "my dog in the rain"): the user asked for it, so nothing can satisfy the request.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field, replace
from datetime import datetime

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from personalq.checkin.lexicon import verb_stems
from personalq.checkin.timewords import find_time_phrases
from personalq.checkin.vocabulary import (BASIC_COLOURS, CHAT_WORDS, DOMAIN_WORDS, SPELLING_MIN_RATIO, STOP_WORDS, CatalogVocabulary, Token, norm,
                                         survey_colours, term_key, tokens)

_ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
             "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
             "eighteenth", "nineteenth", "twentieth"]
_NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
_VERSION_NUMBER = (r"(?:\bv(?:er)?\.?\s?(\d+)(?:'?s)?\b|#\s?(\d+)\b|\b(?:version|revision|rev|iteration|number|no\.|take|mk|mark|gen|generation|round|"
                   r"release|edition)\s*(?:number\s+|no\.\s*)?(\d+(?:'?s)?|"
                   + "|".join(_NUMBERS) + r")\b|\b(" + "|".join(_ORDINALS) + r"|\d{1,2}(?:st|nd|rd|th))\s+(?:(\w+)\s+)?(?:version|revision|iteration)s?\b)")
# "bear 2", "the cat 3.0": a bare number ending the request after a word names that word's version.
_TRAILING_NUMBER = re.compile(r"(?<=[A-Za-z])\s+(\d{1,2})(?:\.0)?(?=\s*(?:$|[,.!?;)]|(?:please|pls|plz|thanks|thx|ty)\b|"
                              r"(?:or|and)\s+(?:later|newer|above|higher|up|earlier|older|below|lower)\b))")  # "logo 2 or later"
_IMAGE_COUNT = re.compile(r"\b(?:trained\s+(?:on|with)|with|from|on)\s+(?:only\s+|just\s+)?(\d{1,4})\s+"
                          r"(?:training\s+)?(?:images|imgs|pics|pictures|photos|shots)\b", re.I)
_ROMAN = re.compile(r"(?<=[A-Za-z]\s)(II|III|IV|VI|VII|VIII|IX)\b")  # "bear II": upper case only, so "I" and "v" stay words
_ROMAN_VALUES = {"II": 2, "III": 3, "IV": 4, "VI": 6, "VII": 7, "VIII": 8, "IX": 9}
# "the one before v4", "right after number 2": a version named relative to another.
_VERSION = re.compile(r"(?:\b(?:(?:right|just|the\s+one)\s+)?(before|after)\s+(?:the\s+)?)?" + _VERSION_NUMBER, re.I)
# "the version right before 4", "the one just after 2": the word "version" or "one" first, the bare number after.
_VERSION_AROUND = re.compile(r"\b(?:version|revision|one)\s+(?:right\s+|just\s+)?(before|after)\s+(?:v\.?\s?|version\s+|number\s+)?(\d+)\b", re.I)
# "the one before bear v4": the subject named between the word and the version.
_VERSION_BESIDE_SUBJECT = re.compile(r"\b(?:(?:right|just|the\s+one)\s+)?(before|after)\s+(?:the\s+|my\s+)?([a-z]+)\s+"
                                     r"(?:v\.?\s?|version\s+|number\s+|#\s?)(\d+)\b", re.I)
# "the previous one", "the one before the latest" (or "the current one"), "not the newest one": the second in that order.
_SECOND = re.compile(r"\b(?:previous|penultimate|second[\s-](newest|latest|most\s+recent|oldest|earliest)|"
                     r"(?:(?:right|just)\s+)?before\s+(?:the|my)\s+(?:latest|newest|last|most\s+recent|current)(?:\s+one)?|"
                     r"(?:second|next)[\s-]to[\s-](?:the[\s-])?(?:last|latest|newest)|(?:last|latest|newest)\s+but\s+one)\b", re.I)
# "lynx, not the newest": that one is ruled out and the rest still fit (unlike "the previous one").
# "not the brand new one", "not the new one"
_ENDS = r"(latest|newest|most\s+recent|last|oldest|earliest|first|1st|brand[\s-]new|(?:old|new)(?=\s+one\b))(?:\s+one)?\b"
_NOT_BESIDE_NOT = r"(?:is|are|was)n['’]?t|except(?:\s+for)?"  # "isn't", "except": like "not", before an order word
_NOT_ORDER = re.compile(r"\b((?:(?:but\s+)?not|" + _NOT_BESIDE_NOT + r")\s+(?:the|my)\s+" + _ENDS + ")", re.I)
_NOT_THE_ONE = re.compile(r"\b(?:not|" + _NOT_BESIDE_NOT + r"|other\s+than|besides)\s+(?:the\s+one\s+(?:that\s+)?(?:i\s+|we\s+)?|my\s+|the\s+)?$", re.I)
_ANY_BUT_ORDER = re.compile(r"\bany(?:thing|one)?\s+(?:\w+\s+)?(but\s+(?:the|my)\s+" + _ENDS + ")", re.I)  # "any lynx but the newest", "anything but the 1st"
# Usage: how often a checkpoint was used ("the one I use most") or whether it ever was ("never used").
_MOST_USED = re.compile(r"\b(?:most[\s-](?:often\s+)?used|over-?us(?:e[ds]?|ing)|(?:use[ds]?|using|run|ran)\s+(?:\w+\s+){0,2}?(?:the\s+)?most(?!\s+recent)(?:\s+often)?|"
                        r"(?:use|using|run)\s+(?:(?:it|like|literally|basically)\s+){0,2}(?:all\s+the\s+time|constantly|a\s*lot|so\s+much|non-?stop|every\s*day|daily)|(?:always|constantly)\s+(?:\w+\s+){0,2}?(?:using|use|run)|keep\s+(?:on\s+)?using|(?:always|keep|constantly)\s+(?:reaching\s+for|grabbing|(?:coming|going)\s+back\s+to|returning\s+to)|fav(?:ou?rite|e)?|go[\s-]to|(?:the|my|our)\s+usual(?!\s+(?:images?|samples?|pics?|pictures?|photos?|shots?|stuff|way|style|place))|(?:i|we)\s+use\s+more\b(?!\s+than)|most\s+popular|(?:the\s+)?most\s+use|"
                        r"(?:i|we)\s+(?:\w+\s+){1,3}?most(?:\s+often)?(?=\s*(?:[?.!,]|$))|(?:use|run)\s+(?:it\s+)?(?:way\s+|much\s+|far\s+)?more\s+than\s+(?:the\s+)?(?:others|rest))\b",
                        re.I)  # "do i reach for most", "the one i use way more than the others", "the usual"
_LEAST_USED = re.compile(r"\b(?:least[\s-](?:often\s+)?used|(?:use[ds]?|run|ran)\s+(?:\w+\s+){0,2}?(?:the\s+)?least(?!\s+once)(?:\s+often)?|(?:rarely|barely|hardly|seldom)\s+(?:\w+\s+)?(?:use[ds]?|run|touch(?:ed)?|open(?:ed)?)|"
                         r"(?:use|run)\s+(?:it\s+)?(?:way\s+|much\s+|far\s+)?less\s+than\s+(?:the\s+)?(?:others|rest))\b", re.I)
_NEVER_USED = re.compile(r"\b(?:(?:never|not\s+yet|not\s+ever|haven'?t|have\s+not|hasn'?t|didn'?t|not)\s+(?:\w+\s+)?(?:used|tried|use|run|ran|touched|opened)(?:\s+yet)?|"
                         r"(?:never|haven'?t|hasn'?t|didn'?t)\s+(?:\w+\s+){1,4}?(?:using|use|used|trying|try)|unused|never[\s-]used|"
                         r"(?:nobody|no\s+one)(?:['’]s|\s+has)?\s+(?:ever\s+)?(?:used|tried|touched|opened)(?:\s+yet)?)\b", re.I)  # "never got around to using"
# "the one i actually use", "ones i've used": used at all, so not the never-used ones. Only with a
# word that stresses the use or the perfect tense: "which one should i use" asks, it states nothing.
_EVER_USED = re.compile(r"\b(?:(?:i|we)(?:\s+(?:actually|really|do|did|have)|'?ve)\s+(?:actually\s+|really\s+|been\s+)?(?:use[ds]?|using|run|ran|tried)|"
                         r"(?:used|run|tried)\s+at\s+least\s+once)\b", re.I)  # "used at least once": any that ever was
_ORDER = re.compile(r"\b(most\s+recent(?:ly)?|latest|newest|recent(?:ly)?|last|oldest|earliest|first|original|og|"
                    r"(?<=the\s)(?:old|new)(?=\s+one\b))\b", re.I)  # "the old one": the oldest of them
# "my second lynx", "the 3rd one": the n-th made, as "first" is the oldest.
_NTH = re.compile(r"\b(?:(" + "|".join(_ORDINALS[1:]) + r")|(\d{1,2})(?:st|nd|rd|th))\b", re.I)
# "the newer 1", "the other 1": a "1" typed for "one" after these words is no version
_ONE_AFTER = frozenset({"newer", "older", "earlier", "later", "next", "other", "another", "latest", "newest", "oldest", "first", "last", "recent",
                        "unused"})
_NEWEST = ("most", "latest", "newest", "new", "recent", "recently", "last")
_USED_BEFORE = re.compile(r"\b(?:used|use|using|ran|run|touched|opened|open|loaded|(?:had|have|has|took|pulled|got)\s+(?:\w+\s+)?out)\s+(?:\w+\s+){0,2}"
                          r"(?:(?:at|in|by)\s+the\s+(?:start|beginning|end|middle)\s+of\s+)?$", re.I)  # "used it back in august", "had open yesterday", "had it out in april"
_NEGATED_USE = re.compile(r"(?:\bnever|\bnot|n['’]?t)[\s-]+$", re.I)
_USE_WINDOW = re.compile(r"(?:used|touched|opened|run)\b", re.I)  # "(haven't) touched since may": a window of last use
_USE_WORDS = re.compile(r"\b(?:used|using|last\s+used|ran|(?:i|we)\s+(?:\w+\s+)?(?:use|run)|(?:had|took|pulled|got)\s+(?:\w+\s+)?out|"
                        r"(?:i|we)\s+(?:had|have)\s+(?:\w+\s+)?open)\b", re.I)  # "did i use last", "i had open most recently", not "use my latest"
# Follow-ups: "the older one", "a newer one" (than the one chosen), "not that one", "another one".
# "the one before that", "the one after it", "the one before": older or newer than the one chosen
_COMPARATIVE = re.compile(r"\b(older|earlier|newer|later|next(?=\s+(?:one|1)\b|\s+version|\s+up)|before(?=\s+(?:th(?:at|is)|it)\b)|after(?=\s+(?:th(?:at|is)|it)\b)|"
                          r"(?<=\bone\s)(?:before|after)(?=\W*$))\b"
                          r"(?:\s+(?:one|1\b|version|th(?:at|is)(?:\s+one)?))?(?:\s+up)?", re.I)
# "the other ones", "the watercolor ones": all that fit, not one of them
PLURAL_ONES = re.compile(r"\b(?:ones|stuff)\b", re.I)  # "the cartoon stuff"
# "a newer one", "one that's newer", "something older", "one of the older ones": any of them, not the next one.
_ANY_OF = re.compile(r"\b(?:an?|any|some|something|one\s+(?:that'?s|that\s+is|which\s+is|of\s+(?:the|my)))\s+(?:\w+\s+)?$", re.I)
# "ones", "photos", "pics": several checkpoints, whatever they show
MANY_OF_THEM = r"(?:ones|photos|pics|pictures|images|shots|stuff|things)"
_THAT_ONE = re.compile(r"\b(?:not\s+(?:that|this)(?:\s+one)?|(?:another|a\s+different|the\s+other)(?:\s+one)?|(?:something|what|anything)\s+else|"
                       r"other(?=\s+(?:\w+\s+){0,2}" + MANY_OF_THEM + r"\b))\b", re.I)  # "what other watercolor ones": the chosen one is out
_SUBJECT_SLOT = frozenset({"my", "the", "our", "your", "this", "that", "which", "whichever", "whatever"})
_SLOT_FILLERS = CHAT_WORDS | {w for w in DOMAIN_WORDS if w.endswith("ed")}  # chat and "trained": no noun of their own
_OPENING_ARTICLES = frozenset({"a", "an", "any"})  # "a griffin", "any griffin" as a whole message; "holding a balloon" is prompt context
_OPENERS = frozenset({"actually", "now", "then", "also", "maybe", "perhaps"})  # "actually, a griffin": still the whole message


@dataclass(frozen=True)
class Constraint:
    """One requirement; `words` are the user's words for it, `start`/`end` their place in the text."""

    attribute: str  # subject | style | environment | cue | version | created | used | never_used | unknown | checkpoints
    value: object
    words: str
    start: int = -1
    end: int = -1
    exact: bool = True  # False when reached through a synonym
    excluded: bool = False  # "not the cartoon one": the checkpoints matching it are ruled out
    optional: bool = False  # "sitting on a bench": how the subject is placed; a card may lack it when none has it


@dataclass
class Intent:
    text: str
    constraints: list[Constraint] = field(default_factory=list)
    order: tuple[str, str] | None = None  # (created|used|use_count, max|min)
    order_words: str = ""
    order_rank: int = 0  # 1: the second in that order ("the previous one")
    comparative: str = ""  # older | newer: than the checkpoint chosen before (a follow-up)
    any_comparative: bool = False  # "a newer one": any of them, not the next one ("the newer one")
    not_that_one: bool = False  # a follow-up rules out the checkpoint chosen before
    unexplained: list[str] = field(default_factory=list)  # content words no rule read (the LLM may parse them)
    ruled_out_order: tuple[str, str] | None = None  # "not the newest": the first in that order is ruled out

    @property
    def subject(self) -> Constraint | None:
        return next((c for c in self.constraints if c.attribute == "subject" and not c.excluded), None)

    def refined(self, other: Intent) -> Intent:
        """This intent changed by a follow-up ("no, the realistic one", "same but for the cat"): each
        attribute the follow-up names replaces its earlier value, a follow-up's exclusion drops the
        term it excludes, a follow-up's order word drops earlier version and date points ("car v2",
        then "the oldest one"), and its version number drops earlier looks, places and dates; "the
        other ones" drop the earlier order word. Earlier
        option clicks answered an earlier question and are dropped."""
        named = {c.attribute for c in other.constraints if not c.excluded}
        replaced = set().union(*(_REPLACES.get(a, {a}) for a in named))
        if other.order or other.comparative:
            replaced |= {"version", "created"}
        if "version" in named:  # "version 2 of that one": a number names one checkpoint of the subject, whatever its look
            replaced |= {"style", "environment", "cue", "created"}
        excluded = {(c.attribute, c.value) for c in other.constraints if c.excluded}
        wanted = {(c.attribute, c.value) for c in other.constraints if not c.excluded}
        kept = [c for c in self.constraints if c.attribute != "checkpoints"
                and not (c.attribute in replaced and not c.excluded)
                and (c.attribute, c.value) not in (wanted if c.excluded else excluded)]
        others = other.not_that_one and PLURAL_ONES.search(other.text)  # "the other ones": all of them, no order
        order = (other.order, other.order_words, other.order_rank) if other.order else (
            (None, "", 0) if other.comparative or "version" in named or others else (self.order, self.order_words, self.order_rank))
        return Intent(self.text, [*kept, *other.constraints], *order, ruled_out_order=other.ruled_out_order)

    def merged(self, other: Intent) -> Intent:
        """This intent plus a follow-up answer's constraints (the answer's order word wins). An earlier
        "not the latest" already kept that one from the options offered: among them it rules out no other."""
        ruled_out = other.ruled_out_order
        if other.order:
            return Intent(self.text, [*self.constraints, *other.constraints], other.order, other.order_words, other.order_rank,
                          ruled_out_order=ruled_out)
        return Intent(self.text, [*self.constraints, *other.constraints], self.order, self.order_words, self.order_rank,
                      ruled_out_order=ruled_out)


_REPLACES = {"subject": {"subject", "unknown"}, "unknown": {"subject", "unknown"}}


def _version_number(m: re.Match) -> int:
    digits, spoken, ordinal = m.group(2) or m.group(3), m.group(4), m.group(5)
    if digits:
        number = int(digits)
    elif spoken:
        number = int(spoken.rstrip("'s")) if spoken[0].isdigit() else _NUMBERS.index(spoken.lower()) + 1  # "my version 3s"
    else:
        number = int(ordinal[:-2]) if ordinal[0].isdigit() else _ORDINALS.index(ordinal.lower()) + 1
    return _relative_version(number, m.group(1) or "")


def _relative_version(number: int, relation: str) -> int:
    """The version right before or after `number` ("the one before v4" is 3), or `number` itself."""
    relation = relation.lower()
    return number - 1 if relation == "before" else number + 1 if relation == "after" else number


# Words of the request grammar a typo may stand for ("frist", "verison", "lastest").
_GRAMMAR_WORDS = frozenset([*_ORDINALS, *_NUMBERS, *(m.lower() for m in calendar.month_name[1:]), "the", "and", "with", "which", "from", "that", "version", "revision",
                            "iteration", "latest", "newest", "oldest", "earliest", "newer", "older", "earlier", "recent", "previous", "used", "never",
                            "yesterday", "today", "week", "month", "year", "days", "weeks", "months", "years", "ago",
                            "before", "after", "since", "until", "between", "fave", "fav", "favorite", "favourite"])  # "fave" is no typo of "five"


_W_SLASH = re.compile(r"\bw/(o\b)?", re.I)  # "w/ the hat", "w/o a hat": chat for "with", "without"
_SHORT_YEAR = re.compile(r"(?<![\w'’])['’](\d{2})\b")


def parse_intent(text: str, vocabulary: CatalogVocabulary, now: datetime, answer: bool = False) -> Intent:
    """`answer=True` parses a reply to a clarification question: no subject slot to fill there.

    Typos are corrected first, so every later step reads "horse" where "hrose" was typed, and a year
    written with two digits ("summer '25") is read in the century of `now`."""
    text = _W_SLASH.sub(lambda m: "without" if m.group(1) else "with", text.replace("_", " "))  # "bear_v2" as typed from a file name
    text = vocabulary.correct(text, _GRAMMAR_WORDS)
    text = _SHORT_YEAR.sub(lambda m: str(now.year // 100 * 100 + int(m.group(1))), text)
    intent = Intent(text)
    taken = _time_version_order(intent, now, vocabulary)
    for m in [*_SETTING_VERB.finditer(text), *_HEDGE.finditer(text), *_QUANTITY.finditer(text)]:  # "set in the forest", "pretty sure": no constraint of their own
        taken[m.start():m.end()] = [True] * (m.end() - m.start())
    scan = _Scan(text, [t for t in tokens(text) if not any(taken[t.start:t.end])])
    _catalog_terms(intent, scan, vocabulary)
    intent.any_comparative = intent.any_comparative or _plural_after_comparative(intent)
    # "striped" reads as a card's "stripes" only once the catalog's own terms ("tabby cat") are taken
    scan.toks = [t if j in scan.used else replace(t, key=vocabulary.base_form(t.key)) for j, t in enumerate(scan.toks)]
    unknown = _cues_and_synonyms(intent, scan, vocabulary)
    if not answer and "subject" not in scan.found:
        _absent_subject(intent, scan, unknown, vocabulary)
    if not _photo_look(intent, scan, vocabulary) and "style" not in scan.found:
        _absent_style(intent, scan, unknown, vocabulary)
    _described_photo(intent, vocabulary)
    _absent_setting(intent, scan, unknown, vocabulary)
    _absent_colour(intent, scan, unknown, vocabulary)
    _absent_material(intent, scan, unknown, vocabulary)
    _companions_as_details(intent, vocabulary)
    intent.constraints = _alternatives(text, _with_exclusions(text, intent.constraints))
    intent.unexplained = [scan.toks[j].text for j in unknown if not any(c.start <= scan.toks[j].start < c.end for c in intent.constraints)]
    return intent


def _plural_after_comparative(intent: Intent) -> bool:
    """"the newer teapots": several newer ones, as "the newer ones" are, not the next one."""
    subject = intent.subject
    if not intent.comparative or subject is None or subject.start < 0:
        return False
    last = subject.words.split()[-1]
    return norm(last) != last.lower() and bool(re.search(r"\b(?:older|newer|earlier|later)\s+(?:\w+\s+)?$", intent.text[:subject.start], re.I))


# "next to croissants", "with a dog", "beside the tree": what the subject is shown with
_COMPANION = re.compile(r"\b(?:with|next\s+to|beside|besides|alongside|near)\s+(?:(?:the|a|an|some|my|its|his|her|their)\s+)?(?:\w+\s+)?$", re.I)


def _companions_as_details(intent: Intent, vocabulary: CatalogVocabulary) -> None:
    """A second catalog subject shown with the first ("a chair next to a cat") is a detail of the
    picture, not a second subject: a description word where a card of the first subject has it,
    else new prompt content."""
    subjects = [c for c in intent.constraints if c.attribute == "subject" and not c.excluded]
    if len(subjects) < 2 or isinstance(subjects[0].value, frozenset):
        return
    first = vocabulary.terms["subject"].get(subjects[0].value, set())
    for c in subjects[1:]:
        if _COMPANION.search(intent.text[:c.start]):
            intent.constraints.remove(c)
            word = term_key(c.words)[-1]
            if vocabulary.cue_words.get(word, set()) & first:
                intent.constraints.append(replace(c, attribute="cue", value=word))


_SETTING_VERB = re.compile(r"\b(?:set|located|situated|placed)(?=\s+(?:in|at|on|inside|among|by|near)\b)", re.I)
# "pretty sure i never used it", "pretty much any", "used at some point", "from way back in 2024": how
# sure the user is or how long ago, no look ("pretty") and no place ("point", "way").
_HEDGE = re.compile(r"\b(?:(?:pretty|fairly|quite|almost)\s+(?:sure|certain|positive|much)|at\s+(?:some|one|any)\s+point|way\s+back)\b", re.I)
# "trained on lots of images", "a bunch of samples": how many, no place ("lot") and no subject ("bunch")
_QUANTITY = re.compile(r"\b(?:(?:a|the)\s+)?(?:lots?|loads?|tons?|heaps?|bunch|plenty|handful|number)\s+of\b", re.I)


def _absent_subject(intent: Intent, scan: _Scan, unknown: list[int], vocabulary: CatalogVocabulary) -> None:
    """A leftover noun in the subject slot that names a thing ("my submarine") names a subject the
    catalog lacks; a leftover that names nothing drawable ("hi", "surprise", "cgi") is passed over."""
    passed = set(scan.modifiers)
    for j in unknown:
        first = j
        while first - 1 in passed:  # "is there a hot air balloon": the slot is before the whole noun
            first -= 1
        if not (scan.in_subject_slot(j, passed) or _THING_OF.search(scan.text[:scan.toks[first].start])):
            continue
        tok = scan.toks[j]
        after = scan.toks[j + 1].key if j + 1 in unknown and _adjacent(scan.text, scan.toks[j:j + 2]) else ""
        if after and vocabulary.is_noun(after) and not (after.endswith("ing") and not vocabulary.names_thing(after)):
            # "pet giraffe", "dealers choice": the last noun is the head; "a wolf howling" has a verb there
            passed.add(j)
            continue
        takes_object = _COMMAND.match(scan.text, tok.end) and _is_verb(tok.key, vocabulary)
        clause = _clause_start(scan.text, tok.start)  # "i dont care which, just load one"
        opens = all(t.key in CHAT_WORDS for t in scan.toks[:j] if t.start >= clause)  # "just load whatever i use", not "my car one"
        if _PURPOSE.search(scan.text[:tok.start]) or takes_object and (opens or tok.text.lower().endswith("ing")) \
                or _WHATEVER_DOES.search(scan.text[:tok.start]) and _CLAUSE_END.match(scan.text, tok.end) \
                and tok.text.lower().endswith("s") and _is_verb(tok.text.lower()[:-1], vocabulary):
            continue  # "load the snowy one": a command; "wearing a hat": what the picture newly shows; "whatever works"
        if vocabulary.names_art_form(tok.key) and any(c.attribute == "style" and c.end >= 0 and not scan.text[c.end:tok.start].strip(" -")
                                                      for c in intent.constraints):
            continue  # "the watercolor print": the style's own noun, no subject
        if _the_word_one(scan.text, tok) and vocabulary.style_clipped_to(tok.key):
            continue  # "the plaster one" where a style starts so: that style (`_absent_style`)
        if vocabulary.names_art_itself(tok.key):
            continue  # "lets make some art": any picture
        # "my peacok", "froggy"; "spectacles", a thing only in the plural typed
        # "the <name> in the chapel", "<name> in <look>": a short name after an article, or opening the message, before a place or look
        shown = (j == 0 or _ARTICLE_BEFORE.search(scan.text[:tok.start])) and _WHERE_OR_HOW_AFTER.match(scan.text, tok.end)
        thing = next((w for w in (tok.key, tok.text.lower()) if vocabulary.names_thing(w)), None) or vocabulary.thing_meant_by(tok.key) \
            or (tok.key if vocabulary.names_unknown(tok.key, bool(shown)) and (
                _HEAD_END.match(scan.text, tok.end) or _ONE_AFTER_NAME.match(scan.text, tok.end))
                else None)  # "the kendama in ...", "the kendama one"
        if thing:
            _add_absent(intent, scan, unknown, j, thing, vocabulary)
            return
        pair = scan.toks[j - 1:j + 1] if j - 1 in unknown and _adjacent(scan.text, scan.toks[j - 1:j + 1]) else []
        if pair and vocabulary.names_compound_thing(f"{pair[0].key} {tok.key}"):  # "wine glass", though glass is a material
            _add(intent, ("unknown", f"{pair[0].key} {tok.key}"), pair, exact=True)
            return
        passed.add(j)


def _clause_start(text: str, end: int) -> int:
    """Where the clause holding `end` starts: just after the last punctuation mark before it, or 0."""
    return max(text.rfind(mark, 0, end) for mark in ",.;!?") + 1


def _names_no_subject(key: str, vocabulary: CatalogVocabulary) -> bool:
    """Whether a word names a look, a place or a description word, none a subject: "1" typed after it
    ("the watercolor 1", "the lino 1", "the lace 1") is "one", no version."""
    found = vocabulary.exact((key,)) or vocabulary.similar(key)
    if found is not None:
        return found[0] != "subject"
    return bool(vocabulary.style_clipped_to(key)) or key in vocabulary.cue_words


def _the_word_one(text: str, tok: Token) -> bool:
    """"the gold one": one word alone names the one meant ("the cobalt blue one" names a colour)."""
    return bool(_ONE_AFTER_NAME.match(text, tok.end) and _THE_BEFORE.search(text, 0, tok.start))


def _is_verb(key: str, vocabulary: CatalogVocabulary) -> bool:
    """The word as typed, or the verb of its "-ing" form ("wearing", "sitting"), is a verb."""
    return any(vocabulary.is_verb(form) for form in [key, *(verb_stems(key) if key.endswith("ing") else [])])


_AS_LONG_AS_IT = r"(?:as\s+)?long\s+as\s+it(?:s|['’]s|\s+is)"  # "anything, as long as its ...": what must hold


# "something with a dinosaur", "a picture of an X", "a stencil of a Y", "where the samples show Z",
# "same but a parrot", "what about a parrot" (after another request), "anything, but it has to be a
# parrot", "whatever, maybe a parrot", "anything, as long as its a parrot", "any model, just make it a
# parrot", "whatever you pick, just a parrot", "anything thats a parrot": a
# subject named after what is drawn ("the one with googly eyes" names a detail of a card).
_THING_OF = re.compile(r"\b(?:\w+\s+of|(?:something|anything|smth|sth)\s+(?:\w+\s+)?w(?:ith)?|(?<!the\s)one\s+with|"
                       r"(?:(?:has|have|needs?|got)\s+to|must|should)\s+be|maybe|" + _AS_LONG_AS_IT + r"|"
                       r"(?:make\s+it|just|that['’]?s)\s+(?=an?\b)|"
                       r"same(?:\s+thing)?\s+(?:but|with)(?:\s+(?:for|as))?|(?:what|how)\s+about|(?:samples?|pics?|pictures?|images?)\s+show(?:s|ing)?|"
                       r"surprise\s+me\s+with|(?:have|got|want|need|find|get|is\s+there|are\s+there|make|do|draw|give|show|generate|create|render|paint)"
                       r"\s+(?:me\s+)?(?=a|an|any|some))"
                       r"\s*(?:(?:a|an|the|my|some|any)\s+)?$", re.I)  # "do i have a griffin", "find me a yak", "make me a yak"
_COMMAND = re.compile(r"\s+(?:(?:up|out)\s+)?(?:me\s+)?(?:the|a|an|my|our|this|that|some|one|whatever|whichever|any)\b", re.I)  # "load up one"
# "whatever works", "whichever fits best": a verb after "whatever" ends a clause of its own, no subject.
_WHATEVER_DOES = re.compile(r"\b(?:whatever|whichever)\s+$", re.I)
_CLAUSE_END = re.compile(r"\s*(?:$|[,.!?;]|(?:best|for\s+(?:me|you|u)|i\s+guess)\b)", re.I)
# "for my desktop wallpaper", "as a gift": what the picture is for, not what it shows.
_PURPOSE = re.compile(r"\b(?:for|as|to)\s+(?:(?:my|a|an|the|our|some)\s+)?(?:\w+\s+)?$", re.I)


# "a 3d render of the car", "line art lynx": a word before a noun for a way of making pictures names
# that way, whatever the word. Not before "style": "lifelike style" may be a synonym the catalog
# cannot place, and a no-match would then hide the checkpoint the rest of the request names.
_MEDIUM_AFTER = re.compile(r"[\s-]*(?:render(?:ed|ing)?|art|artwork|paint|painting|drawing|illustration|sketch|print|aesthetic)\b", re.I)
_OF_THE = re.compile(r"\s+of\s+(?:(?:the|a|an|my|that|this)\s+)?", re.I)
# "chair painted in oils", "the lynx in charcoal", "made of clay", "make it charcoal", "it has to be charcoal": no article before a medium
_IN_MEDIUM = re.compile(r"\b(?:in|made\s+(?:of|from|out\s+of)|make\s+it|(?:has|have|needs?)\s+to\s+be|must\s+be|" + _AS_LONG_AS_IT + r")\s+$", re.I)


# "the lynx as a cartoon", "drawn as a doodle": what follows names how it is drawn.
_AS_A = re.compile(r"\b(?:(?:as|like)\s+(?:a|an)|(?:done|made|drawn|painted|rendered|shown)\s+(?:as|like))\s+$", re.I)  # "done as graffiti"
_STYLE_AFTER = re.compile(r"[\s-]+styled?\b", re.I)  # "my dog in anime style": a word that reads as a style, before "style"


# "as a photo", "like a real photo", "an actual colour photo of", "the photo one", "a photographic bear",
# "no photo": a photograph is how it looks, while "a photo of my dog" only asks for a picture (so
# "photo" alone is a domain word). "An old photo" is left to the description words around it: which
# of a catalog's styles are old kinds of photograph, WordNet cannot tell.
_AS_PHOTO = re.compile(r"\b(?:(?:as|like)\s+(?:a|an)\s+(?:real\s+|actual\s+)?|(?:real|actual)\s+(?:colou?r\s+)?)photo(?:graph)?\b|\bphotographic\b|"
                       r"(?<=\bno\s)photo(?:graph)?s?\b|"
                       r"(?:(?<=\bthe\s)|(?<=\ba\s))photo(?:graph)?(?=[\s-]+(?:one|ones|version|style|look)\b)", re.I)  # not "the old scratchy photo one"


# "not the old photo", "without a photo look": a photo ruled out is a look, whatever its age
_NOT_PHOTO = re.compile(r"\b(?:no|not|without)\s+(?:the\s+|an?\s+)?(?:[\w-]+\s+)?(photo(?:graph)?s?)\b", re.I)

# "the bear photo", "the bear photo at the beach", "the bear photo that i made": a photo right after its subject is the look
_SUBJECT_PHOTO = re.compile(r"\s+(photo(?:graph)?s?)(?=\s*(?:$|[,.!?;]|(?:at|in|on|by|from|with|near|that|thats|which)\b))", re.I)


def _photo_look(intent: Intent, scan: _Scan, vocabulary: CatalogVocabulary) -> bool:
    """A photograph asked for as a look is the catalog's photorealistic style, or one it lacks; beside
    another style only when one of them is ruled out ("no paper, no photo"; "a real colour photo" where
    the catalog's one photo style is ruled out asks for a photo it lacks)."""
    subject = intent.subject
    after = _SUBJECT_PHOTO.match(scan.text, subject.end) if subject else None
    photo = _AS_PHOTO.search(scan.text) or _NOT_PHOTO.search(scan.text)
    span = photo.span(photo.lastindex or 0) if photo else after.span(1) if after else None
    if span is None:
        return False
    ruled_out = {c.value for c in intent.constraints if c.attribute == "style" and _EXCLUSION.search(scan.text[:c.start])}
    if "style" in scan.found and not (ruled_out or _EXCLUSION.search(scan.text[:span[0]])):
        return False
    start, end = span
    hit = next((h for h in map(vocabulary.similar, ("photorealistic", "photo")) if h and h[0] == "style"), None)  # or an "old photo" style
    attribute, value = hit[:2] if hit and hit[1] not in ruled_out else ("unknown", "photo")
    intent.constraints.append(Constraint(attribute, value, scan.text[start:end], start, end, exact=attribute == "unknown"))
    return True


# "old photo", "old-timey photo", "old brownish photo": a description word said of a photograph
_PHOTO_AFTER = re.compile(r"(?:[\s-]+[a-z]+)?[\s-]+photo(?:graph)?s?\b", re.I)


def _described_photo(intent: Intent, vocabulary: CatalogVocabulary) -> None:
    """A description word said of a photograph ("the old photo of my <subject>") is either the card's
    own word (a card that reads "an old <process>") or the look of the catalog's photo style: which of
    a catalog's styles are old kinds of photograph, WordNet cannot tell, so a card with either fits."""
    said = [(i, photo) for i, c in enumerate(intent.constraints) if c.attribute == "cue" and isinstance(c.value, str)
            and (photo := _PHOTO_AFTER.match(intent.text, c.end))
            and not any(o.start < photo.end() and c.end < o.end for o in intent.constraints if o is not c)]
    hit = vocabulary.similar("photo") if said and vocabulary.terms["style"] else None
    looks = {w for w in hit[1] if w in vocabulary.cue_words} if hit and hit[0] == "style" else set()  # the style's own words its cards say
    for i, photo in said if looks else ():
        c = intent.constraints[i]
        intent.constraints[i] = replace(c, value=frozenset({c.value, *looks}), words=intent.text[c.start:photo.end()], end=photo.end())


def _named_as_look(scan: _Scan, tok: Token, subject: Constraint | None, vocabulary: CatalogVocabulary) -> bool:
    """"the <subject> shot as a <brand>", "a <brand> of the <subject>": a name said of how the subject
    is shown is the kind of picture asked for."""
    said = _AS_A.search(scan.text[:tok.start]) or subject is not None and _OF_THE.fullmatch(scan.text, tok.end, subject.start)
    return bool(said) and vocabulary.names_look_by_name(tok.key)


def _absent_style(intent: Intent, scan: _Scan, unknown: list[int], vocabulary: CatalogVocabulary) -> None:
    """A leftover word that names a kind of art ("fresco", "a pencil sketch"), or one or two leftover
    words right before the subject that read as a style ("graffiti sled", "anime lynx") or that WordNet
    files as an artistic movement or style ("a rococo sled"),
    ask for a style the catalog lacks, as does a word before a medium noun ("3d render", "line art").
    The start of one catalog style right after the subject ("the <subject> lino") is that style."""
    right_after = _right_after_subject(intent, scan, unknown)[:1]
    subject = intent.subject
    for j in unknown:
        tok = scan.toks[j]
        medium = _MEDIUM_AFTER.match(scan.text, tok.end)
        depicted_as = (_AS_A.search(scan.text[:tok.start]) or _STYLE_AFTER.match(scan.text, tok.end)) and vocabulary.looks_like_style(tok.key)
        after_in = _IN_MEDIUM.search(scan.text[:tok.start])
        # "water painting", "in lino", "<subject> lino", "the gold one": the style
        clipped = vocabulary.style_clipped_to(tok.key) if medium or after_in or j in right_after or _the_word_one(scan.text, tok) else None
        in_medium = after_in and (clipped or vocabulary.names_medium(tok.key) or vocabulary.medium_meant_by(tok.key)  # "in wotercolor"
                                  or vocabulary.names_unknown(tok.key)  # a craft's own name
                                  or vocabulary.names_art_style(tok.key)  # "in dadaism"
                                  or vocabulary.names_material_or_kind(tok.key))  # "in porcelain", "done in felt", "in lace"
        pair = scan.toks[j + 1] if j + 1 in unknown and _adjacent(scan.text, scan.toks[j:j + 2]) else None
        if pair and after_in and (vocabulary.names_compound_matter(f"{tok.key} {pair.key}") or vocabulary.names_medium(pair.key)):
            _add(intent, ("unknown", f"{tok.key} {pair.key}"), [tok, pair], exact=True)
            return  # "a dog in cast iron": one noun for a material, said as what it is made in; "in felt pen"
        made = _ANYTHING_BEFORE.search(scan.text[:tok.start]) and vocabulary.names_making_in_art_form(tok.key)  # "anything knitted?"
        if medium or depicted_as or _named_as_look(scan, tok, subject, vocabulary) or in_medium or made or clipped \
                or vocabulary.names_art_form(tok.key):
            end = medium.end() if medium else tok.end
            attribute, value = ("style", clipped) if clipped else ("unknown", tok.key)
            intent.constraints = [c for c in intent.constraints  # "print" of "lino print" is no cue of its own
                                  if not (c.attribute == "cue" and tok.start <= c.start and c.end <= end)]
            intent.constraints.append(Constraint(attribute, value, scan.text[tok.start:end], tok.start, end, exact=not clipped))
            return
    before = _right_before_subject(intent, scan, unknown)
    for span in (before[-2:], before[-1:]) if before else ():
        words = intent.text[scan.toks[span[0]].start:scan.toks[span[-1]].end]  # "a cast iron spoon": one noun for its material
        if vocabulary.looks_like_style(words.lower()) or vocabulary.names_art_style(words.lower()) \
                or len(span) == 2 and vocabulary.names_compound_matter(words.lower()) \
                or len(span) == 2 and "-" in words and vocabulary.names_unknown(scan.toks[span[0]].key) \
                or len(span) == 1 and (vocabulary.names_unknown(words.lower())  # a craft's own name
                                       or vocabulary.names_making_in_art_form(words.lower())):  # "a knitted scarf"
            _add(intent, ("unknown", words.lower()), [scan.toks[j] for j in span], exact=True)
            return
    for a, b in _pairs(unknown, scan):  # "a chair but action painting": an art movement's two-word name anywhere
        words = f"{scan.toks[a].key} {scan.toks[b].key}"
        if vocabulary.names_art_style(words):
            _add(intent, ("unknown", words), [scan.toks[a], scan.toks[b]], exact=True)
            return
    after = _right_after_subject(intent, scan, unknown)  # "a chair rococo": an art movement's name after it
    for span in (after[:2], after[:1]) if after else ():
        words = intent.text[scan.toks[span[0]].start:scan.toks[span[-1]].end].lower()
        if vocabulary.names_art_style(words):
            _add(intent, ("unknown", words), [scan.toks[j] for j in span], exact=True)
            return
    for j in reversed(before):  # "neon cyberpunk toy": any of the words before it may name its material
        if _made_of(scan.toks[j].key, intent, vocabulary):
            _add(intent, ("unknown", scan.toks[j].key), [scan.toks[j]], exact=True)
            return


def _made_of(key: str, intent: Intent, vocabulary: CatalogVocabulary) -> bool:
    """"neon toy", "glass chair": a noun before the subject names a material or a kind of it, unless
    the two are one compound noun ("house cat", "toy dog")."""
    return vocabulary.names_material_or_kind(key) and not vocabulary.is_compound(f"{key} {intent.subject.words.lower()}")


def _absent_setting(intent: Intent, scan: _Scan, unknown: list[int], vocabulary: CatalogVocabulary) -> None:
    """A leftover place or weather word after "in"/"at"/"on"... ("my dog in the rain", "at the ocean")
    asks for a setting no checkpoint was trained in; it is a constraint like a known place ("on the
    beach"), so the answer is a no-match that offers the nearest checkpoints, not any of them silently.
    So does a container it is in ("in a jar"). A leftover that names no place ("in a poncho", "at
    dusk") stays prompt context, as does one that only modifies the place after it ("through the boat
    shed": the shed is the place; not "on a diner counter", where the counter is a detail of the
    picture) or only restates the request's own place in broader words ("in snowy weather"), or names
    a part of the catalog place before it ("in the church nook"). A word right before the subject or a
    word for a scene that usually names a place ("an ocean horse", "a river scene") sets it there too,
    unless the two are one noun ("a sea horse")."""
    before = _right_before_subject(intent, scan, unknown)[-1:] + [j for j in unknown if _SCENE_AFTER.match(scan.text, scan.toks[j].end)]
    for j in unknown:
        tok = scan.toks[j]
        if _covered_by(intent, tok):
            continue  # "in <brand>": read as a look already
        if j in before:
            compound = vocabulary.is_compound(f"{tok.key} {scan.toks[j + 1].key}") if j + 1 < len(scan.toks) else False
            word = tok.key if vocabulary.usually_names_place(tok.key) and not compound else None
        elif not in_place_slot(scan.text, tok.start):  # the slot first: the place check below walks WordNet
            continue
        else:
            inside = bool(_INSIDE.search(scan.text[:tok.start]))  # "in a jar": what holds the subject is its setting
            word = next((w for w in (tok.text.lower(), tok.key)  # "woods", whose "wood" is no place
                         if vocabulary.names_place(w) or inside and vocabulary.names_container(w)), None)
        if word is None:
            continue
        head = scan.toks[j + 1] if j + 1 < len(scan.toks) and _adjacent(scan.text, scan.toks[j:j + 2]) else None
        if head is not None and (_covered_by(intent, head, "environment") or j + 1 in unknown and vocabulary.names_place(head.key)):
            continue
        if j > 0 and _adjacent(scan.text, scan.toks[j - 1:j + 1]) and _covered_by(intent, scan.toks[j - 1], "environment"):
            continue
        if any(vocabulary.is_above(word, "environment", key) for c in intent.constraints if c.attribute == "environment"
               for key in (c.value if isinstance(c.value, frozenset) else (c.value,))):
            continue  # "in snowy weather": the weather is the snow
        _add_absent(intent, scan, unknown, j, word, vocabulary)
        return


def _add_absent(intent: Intent, scan: _Scan, unknown: list[int], j: int, word: str, vocabulary: CatalogVocabulary) -> None:
    """An absent subject or place, named with the leftover noun right before it ("straw man",
    "taxi rank"), so the no-match names what was asked for, not only its head noun."""
    span = [scan.toks[j]]
    before = scan.toks[j - 1] if j - 1 in unknown and _adjacent(scan.text, scan.toks[j - 1:j + 1]) else None
    if before is not None and vocabulary.is_mainly_noun(before.key) and not vocabulary.names_colour(before.key):
        span, word = [before, *span], f"{before.key} {word}"
    _add(intent, ("unknown", word), span, exact=True)


_SCENE_AFTER = re.compile(r"[\s-]+(?:scene|shot|pic|picture|image|setting|backdrop|background|one)s?\b", re.I)  # "a river scene", "the lake one"
# "printed in", "done in", "drawn in": what follows is what the picture was made in
_MADE_IN = re.compile(r"\b\w+(?:ed|en|wn|ne)\s+in\s+$", re.I)


def _absent_colour(intent: Intent, scan: _Scan, unknown: list[int], vocabulary: CatalogVocabulary) -> None:
    """A colour right before the subject ("the green lynx") is how the user's subject looks, as "the
    gray dog" is where a card has a gray one; when no card has it, nothing fits. What the picture
    should newly show ("wearing sunglasses", "with a party hat") stays prompt context, as the
    Repo-Prompts spec has it. So is a colour right before a description word ("with a blue glaze"):
    the glaze a card describes must be that colour; and one the picture was made in ("printed in red")."""
    before = _right_before_subject(intent, scan, unknown)
    made_in = [j for j in unknown if _MADE_IN.search(scan.text[:scan.toks[j].start])]
    for j in before[-1:] + _before_a_cue(intent, scan, unknown) + made_in:
        tok = scan.toks[j]
        if vocabulary.names_colour(tok.key) and not _covered_by(intent, tok) and not (
                _after_its_shade(scan.toks, j) and _covered_by(intent, scan.toks[j - 1], "cue")):  # "the mint green dog"
            _add(intent, ("unknown", tok.key), [tok], exact=True)
            return


def _before_a_cue(intent: Intent, scan: _Scan, unknown: list[int]) -> list[int]:
    """The leftover words right before a description word ("blue" of "with a blue glaze")."""
    return [j for j in unknown if j + 1 < len(scan.toks) and _adjacent(scan.text, scan.toks[j:j + 2])
            and _covered_by(intent, scan.toks[j + 1], "cue")]


def _after_its_shade(toks: list[Token], j: int) -> bool:
    """Whether a colour word follows a shade the colour survey names with it ("mint green", "cobalt blue")."""
    return j > 0 and f"{toks[j - 1].key} {toks[j].key}" in survey_colours()


_MADE_OF = re.compile(r"\bmade\s+(?:of|from|out\s+of)\s+(?:\w+\s+)?$", re.I)


def _absent_material(intent: Intent, scan: _Scan, unknown: list[int], vocabulary: CatalogVocabulary) -> None:
    """What the picture's subject is made of ("a chair made of glass", "carved in wood") is how it
    looks: where no card has that material, nothing fits; so is the material of a part a card
    describes ("with the iron handle" where a card has a handle, and no card iron)."""
    described = {j for j in _before_a_cue(intent, scan, unknown)  # not the "orange" of "yellow-orange door"
                 if not vocabulary.names_colour(scan.toks[j].key) and not (j and scan.text[scan.toks[j - 1].end:scan.toks[j].start] == "-")}
    for j in unknown:
        tok = scan.toks[j]
        before = scan.text[:tok.start]
        if (_MADE_OF.search(before) or _MADE_IN.search(before) or j in described) and vocabulary.names_matter(tok.key) and not _covered_by(intent, tok):
            _add(intent, ("unknown", tok.key), [tok], exact=True)
            return


_STYLE_GAP = re.compile(r"[\s\-]*(?:(?<=\s)styled?[\s\-]+)?", re.I)  # "anime lynx", "comic style lynx"


def _right_before_subject(intent: Intent, scan: _Scan, unknown: list[int]) -> list[int]:
    """The leftover words that directly precede the subject's words ("anime" of "anime lynx"), or
    precede it with only "style" between ("comic style lynx")."""
    subject = intent.subject
    if subject is None:
        return []
    run: list[int] = []
    for j in sorted(unknown, reverse=True):
        end = subject.start if not run else scan.toks[run[0]].start
        if scan.toks[j].end <= end and _STYLE_GAP.fullmatch(intent.text[scan.toks[j].end:end]):
            run.insert(0, j)
    return run


def _right_after_subject(intent: Intent, scan: _Scan, unknown: list[int]) -> list[int]:
    """The leftover words that directly follow the subject's words ("rococo" of "chair rococo")."""
    subject = intent.subject
    run: list[int] = []
    for j in sorted(unknown) if subject is not None else ():
        start = subject.end if not run else scan.toks[run[-1]].end
        if scan.toks[j].start >= start and not intent.text[start:scan.toks[j].start].strip():
            run.append(j)
    return run


# "in the rain", "at the ocean", "by a tram stop", "down a river", "the one from the beach": where a
# noun names the picture's setting, never a look ("rain" is not watercolor). A setting no card names
# is one the catalog lacks (_absent_setting).
_PLACE_SLOT = re.compile(r"\b(?:in|at|on|by|near|next\s+to|under|beside|inside|outside|atop|along|across|around|over|above|from|"
                         r"down|up|through|into|among|amid|amongst|within|beneath|below|behind)\s+"
                         r"(?:(?:the|a|an|some)\s+)?(?:\w+\s+)?$", re.I)


# "in a jar", "inside a basket": what the subject is in, where a container names its setting
_INSIDE = re.compile(r"\b(?:in|inside|into|within)\s+(?:(?:the|a|an|some|my)\s+)?(?:\w+\s+)?$", re.I)


def in_place_slot(text: str, start: int) -> bool:
    """Whether the word at `start` follows a place preposition ("in the", "by some old")."""
    return bool(_PLACE_SLOT.search(text[:start]))


def heads_a_thing_phrase(text: str, start: int, end: int) -> bool:
    """Whether the word at start..end ends its noun phrase outside a place slot: "the walrus in
    watercolor" is about a walrus, "the grinding stone" not about a grinding, "by the plum trees" not about trees."""
    return bool(_HEAD_END.match(text, end)) and not in_place_slot(text, start)


# A negation up to three words (and a place preposition) before a term, hyphen included ("isnt photo-real")
_EXCLUSION = re.compile(r"\b(?:not|no(?!\s+matter\b)|nothing|none\s+of|except|excluding|without|minus|any(?:thing)?\s+but(?!\s+(?:make|do|it|it['’]?s|has|have|must|should|needs?)\b)|other\s+than|besides|apart\s+from|(?:is|are|was|were|does|do|did|has|have)n['’]?t(?!\s+(?:really\s+)?(?:matter|care|mind)\b)|"
                        r"skip(?:ping)?|avoid(?:ing)?|ignor(?:e|ing)|forget(?:\s+about)?|leave\s+out|instead\s+of|rather\s+than)\b"
                        r"(?:\s+\w+(?:['’]\w+)?){0,3}(?:\s+(?:in|at|on|from|with|by|near|under)(?:\s+(?:the|a|an|my))?)?[\s-]*$", re.I)
# "except cartoon or pixel", "except the lake ones and the X", "not in the X or down the Y", "and the
# one out on the X"; not
# "not the watercolor one, the realistic X"
_COORDINATION = re.compile(r"\s*(?:,|/|(?:ones?\s*)?,?\s*(?:or|nor|and))\s*(?:the\s+ones?\s+(?:(?:out|up|down|over|back)\s+)?)?"
                           r"(?:(?:in|at|on|by|near|under|down|up|inside|from)\s+)?(?:(?:the|a|an)\s+)?$", re.I)
_COMMA_THE = re.compile(r"\s*,\s*(?:the|a|an)\s+", re.I)
_COMMA_PLACE = re.compile(r"\s*,\s*(?:in|at|on|by|near|under|inside)\s+(?:(?:the|a|an)\s+)?", re.I)
_WHEN = frozenset({"created", "used", "version", "never_used"})  # when made or used, and which version: no look
_EXCLUDABLE = frozenset({"subject", "style", "environment", "cue", "version", "created", "used", "never_used", "unknown"})


# "no the realistic one", "no, that one": a reply's opening "no" turns down the last answer, not a term.
_OPENING_NO = re.compile(r"^\W*(?:(?:hmm+|oh|ah|uh)\W+)?no\b\W*(?=(?:the|a|an|that|this|i|my|actually|wait)\b)", re.I)


# "watercolor or cartoon", "the cat or dog", "pixel art / cartoon": either term fits
_OR_BETWEEN = re.compile(r"\s*,?\s*(?:or|/)\s*(?:(?:the|a|an|in|at|on|my)\s+)?", re.I)
_ALTERNATIVE_ATTRIBUTES = frozenset({"subject", "style", "environment"})


def _alternatives(text: str, constraints: list[Constraint]) -> list[Constraint]:
    """Two terms of one attribute joined by "or" are one constraint either meets (a frozenset of their
    values, as "v1 or v2" is), not two that no checkpoint can meet at once."""
    out: list[Constraint] = []
    for c in sorted(constraints, key=lambda c: c.start):
        last = out[-1] if out else None
        if (last is not None and c.attribute == last.attribute and c.attribute in _ALTERNATIVE_ATTRIBUTES and not c.excluded
                and not last.excluded and c.start >= 0 and last.end >= 0 and _OR_BETWEEN.fullmatch(text[last.end:c.start])):
            values = _as_alternatives(last.value) | _as_alternatives(c.value)
            out[-1] = replace(last, value=values, words=text[last.start:c.end], end=c.end, exact=last.exact and c.exact)
        else:
            out.append(c)
    return out


def _as_alternatives(value: object) -> frozenset:
    """A constraint's value as the alternatives it allows: its frozenset, or the one value."""
    return value if isinstance(value, frozenset) else frozenset({value})


def _with_exclusions(text: str, constraints: list[Constraint]) -> list[Constraint]:
    """A term right after a negation ("but not the cartoon one", "except watercolor") rules its
    matches out instead of requiring them; the negation reaches back at most three words, over one
    noun phrase only ("anything but realistic with a dog" asks for a dog), and on through a list
    ("anything but cartoon or pixel art", "nothing from 2024 or 2025")."""
    opening = _OPENING_NO.match(text)
    skip = opening.end() if opening else 0
    out: list[Constraint] = []
    previous: Constraint | None = None
    for c in sorted(constraints, key=lambda c: c.start):
        if c.attribute in _EXCLUDABLE and c.start >= 0:
            between = text[previous.end:c.start] if previous is not None else ""
            # (a bare comma lists looks, or dates: "not watercolor, from 2024" asks for 2024)
            # ("not by the wharfside, the inky one": after a comma, "the" names a look of another kind anew;
            # "not <look>, in the <place>": a place after a comma is asked for)
            listed = previous is not None and previous.excluded and _COORDINATION.fullmatch(between) and (
                (c.attribute in _WHEN) == (previous.attribute in _WHEN) or re.search(r"\b(?:or|nor|and)\b", between)) \
                and not (_COMMA_THE.fullmatch(between) and c.attribute != previous.attribute) and not _COMMA_PLACE.fullmatch(between)
            if listed or c.start > skip and _negated(text, skip, previous, c):
                c = replace(c, excluded=True)
        out.append(c)
        if c.start >= 0:
            previous = c
    ruled_out = {(c.attribute, c.value) for c in out if c.excluded}  # "not the cellar ones, im sick of cellars"
    return [c for c in out if c.excluded or (c.attribute, c.value) not in ruled_out]


def _negated(text: str, skip: int, previous: Constraint | None, c: Constraint) -> bool:
    """Whether a negation reaches the term `c`: one after the term before it, or one before both
    when the two make one noun phrase ("not the cartoon dog"), not across a preposition
    ("anything but realistic with a dog" asks for a dog)."""
    after_previous = max(skip, previous.end) if previous is not None else skip
    if _EXCLUSION.search(text, after_previous, c.start):
        return True
    negation = _EXCLUSION.search(text, skip, c.start)
    if negation is None:
        return False
    return previous is None or previous.start < negation.start() or previous.excluded and not text[previous.end:c.start].strip(" -")


@dataclass
class _Scan:
    """The words left after time, version and order phrases, and what is known about each."""

    text: str
    toks: list[Token]
    used: set[int] = field(default_factory=set)  # part of a matched term
    modifiers: set[int] = field(default_factory=set)  # style/look words: may sit between "my" and the subject
    found: set[str] = field(default_factory=set)  # attributes already constrained

    def in_subject_slot(self, j: int, modifiers: set[int] | None = None) -> bool:
        """Where a noun names the subject: first, or after "my"/"the" and any style or look words."""
        skip = self.modifiers if modifiers is None else modifiers
        k = j - 1
        while k >= 0 and (k in skip or self.toks[k].key in _SLOT_FILLERS):  # "my lil giraffe", "my trained giraffe"
            k -= 1
        clause = _clause_start(self.text, self.toks[k].start) if k >= 0 else 0
        # "ooh a unicorn", "dont care which, a unicorn": only chat words before it in its clause
        opening = all(t.key in CHAT_WORDS or t.key in _OPENERS for t in self.toks[:k] if t.start >= clause)
        return k < 0 or self.toks[k].key in _SUBJECT_SLOT or (opening and self.toks[k].key in _OPENING_ARTICLES)


# "my most used one overall", "the newest thing i trained", "the latest of them all": an order over every checkpoint
ACROSS_ALL = re.compile(r"\b(?:overall|of\s+(?:them\s+)?all|(?:out\s+)?of\s+everything|across\s+(?:everything|the\s+board)|"
                        r"in\s+(?:the|my)\s+(?:whole|entire)\s+\w+|"
                        r"(?<=\s)thing\s+(?:i|we)(?:['’]ve|\s+have)?\s+(?:ever\s+)?(?:trained|made|created))\b", re.I)


def _time_version_order(intent: Intent, now: datetime, vocabulary: CatalogVocabulary) -> list[bool]:
    """Time, version and order phrases first: they hold digits and words ("first") terms must not take."""
    text = intent.text
    taken = [False] * len(text)

    def take(start: int, end: int) -> None:
        taken[start:end] = [True] * (end - start)

    for window, start, end in find_time_phrases(text, now):
        if _part_of_a_term(text, start, end, vocabulary):
            continue  # a season word typed as part of a catalog place or style is that term, no season
        use = _USED_BEFORE.search(text[:start])  # "never used watercolor from 2025": never used has no date, so made then
        used = bool(use and not _NEGATED_USE.search(text[:use.start()])) or bool(_USE_WINDOW.match(window.words))
        intent.constraints.append(Constraint("used" if used else "created", window, window.words, start, end))
        take(start, end)
    for m in _IMAGE_COUNT.finditer(text):  # "trained on 30 images": a number its description writes, no version
        if not any(taken[m.start():m.end()]):
            intent.constraints.append(Constraint("cue", m.group(1), m.group(0), m.start(), m.end()))
            take(m.start(), m.end())
    for m in _VERSION_AROUND.finditer(text):
        if not any(taken[m.start():m.end()]):
            intent.constraints.append(Constraint("version", _relative_version(int(m.group(2)), m.group(1)), m.group(0), m.start(), m.end()))
            take(m.start(), m.end())
    for m in _VERSION_BESIDE_SUBJECT.finditer(text):
        if not any(taken[m.start():m.end()]) and m.group(2).lower() not in STOP_WORDS:
            intent.constraints.append(Constraint("version", _relative_version(int(m.group(3)), m.group(1)), m.group(0), m.start(), m.end()))
            take(m.start(), m.start(2))  # the subject word stays for the subject
            take(m.end(2), m.end())
    for m in _VERSION.finditer(text):
        if not any(taken[m.start():m.end()]):
            intent.constraints.append(Constraint("version", _version_number(m), m.group(0), m.start(), m.end()))
            take(m.start(), m.end())
            if m.group(6) and m.group(6).lower() not in STOP_WORDS:  # "the second tree version": the subject stays
                taken[m.start(6):m.end(6)] = [False] * (m.end(6) - m.start(6))
    for pattern, numeral in ((_TRAILING_NUMBER, int), (_ROMAN, _ROMAN_VALUES.get)):
        for m in pattern.finditer(text):
            word = re.search(r"(\w+)\W*$", text[:m.start(1)])
            look = bool(word) and m.group(1) == "1" and _names_no_subject(norm(word.group(1)), vocabulary)
            if not any(taken[m.start(1):m.end()]) and word and word.group(1).lower() not in STOP_WORDS | _ONE_AFTER \
                    and not look:  # "the watercolor 1": "one" typed after a style or a place, no version
                intent.constraints.append(Constraint("version", numeral(m.group(1)), m.group(0).strip(), m.start(1), m.end()))
                take(m.start(1), m.end())
    _version_alternatives(intent, taken)
    for m in _NEVER_USED.finditer(text):
        if not any(taken[m.start():m.end()]):
            intent.constraints.append(Constraint("never_used", True, m.group(0), m.start(), m.end()))
            take(m.start(), m.end())
    for pattern, pick in ((_MOST_USED, "max"), (_LEAST_USED, "min")):
        m = pattern.search(text)
        if m and not intent.order and not any(taken[m.start():m.end()]):
            if _NOT_THE_ONE.search(text[:m.start()]):  # "not the one i use most": it is ruled out, the rest fit
                intent.ruled_out_order = ("use_count", pick)
            else:
                intent.order, intent.order_words = ("use_count", pick), f"{'most' if pick == 'max' else 'least'} used"
            take(m.start(), m.end())
    m = _EVER_USED.search(text)  # "the least used one i've actually used": of those ever used
    if m and not any(taken[m.start():m.end()]):
        intent.constraints.append(Constraint("never_used", True, m.group(0), m.start(), m.end(), excluded=True))
        take(m.start(), m.end())
    m = _SECOND.search(text)
    if m and not intent.order and not any(taken[m.start():m.end()]):
        oldest = (m.group(1) or "").lower() in ("oldest", "earliest")
        intent.order, intent.order_words, intent.order_rank = ("created", "min" if oldest else "max"), m.group(0), 1
        take(m.start(), m.end())
        for other in _ORDER.finditer(text):  # "the previous watch, not the newest one": one order only
            take(other.start(), other.end())
    m = _NOT_ORDER.search(text) or _ANY_BUT_ORDER.search(text)
    if m and not any(taken[m.start(1):m.end(1)]):
        intent.ruled_out_order = ("created", "min" if m.group(2).lower() in ("oldest", "earliest", "first", "1st", "old") else "max")
        take(m.start(1), m.end(1))
    m = _NTH.search(text)
    if m and not intent.order and not any(taken[m.start():m.end()]):
        rank = _ORDINALS.index(m.group(1).lower()) if m.group(1) else int(m.group(2)) - 1
        beyond = _NTH_OR_BEYOND.match(text, m.end())
        than = _THAN.search(text[:m.start()])
        if rank >= 0 and beyond:  # "my second shoe or newer": that version and every later one
            versions = _versions_past(frozenset({rank + 1}), beyond.group(2), inclusive=True)
            intent.constraints.append(Constraint("version", versions, m.group(0), m.start(), m.end()))
            take(m.start(), m.end())
            take(beyond.start(1), beyond.end())
        elif rank >= 0 and than:  # "newer than my third sled": every version after that one
            versions = _versions_past(frozenset({rank + 1}), than.group(1), inclusive=False)
            intent.constraints.append(Constraint("version", versions, text[than.start():m.end()], than.start(), m.end()))
            take(than.start(), m.end())
        elif rank >= 0:
            intent.order, intent.order_words, intent.order_rank = ("created", "min"), m.group(0), rank
            take(m.start(), m.end())
    m = _COMPARATIVE.search(text)
    if m and not any(taken[m.start():m.end()]):
        intent.comparative = "older" if m.group(1).lower() in ("older", "earlier", "before") else "newer"
        intent.any_comparative = bool(_ANY_OF.search(text[:m.start()]) or re.match(r"\s+ones\b", text[m.end(1):], re.I))  # "the older ones"
        take(m.start(), m.end())
    m = _THAT_ONE.search(text)
    if m:
        intent.not_that_one = True
        take(m.start(), m.end())
    for m in _ORDER.finditer(text):
        if any(taken[m.start():m.end()]) or intent.order:
            continue
        word = m.group(1).lower()
        dated_use = any(c.attribute == "used" for c in intent.constraints)
        if dated_use and word == "last" and re.match(r"\s+(?:used|ran|run|touched|opened|had\s+(?:it\s+)?out)\b", text[m.end():], re.I):
            continue  # "the ones i last used in april": when they were used, no order among them
        never = any(c.attribute == "never_used" and not c.excluded for c in intent.constraints)  # "the oldest one i never used": made
        by_use = _USE_WORDS.search(text) and not dated_use and not never
        intent.order = ("used" if by_use else "created", "max" if word.startswith(_NEWEST) else "min")
        intent.order_words = m.group(0)
        take(m.start(), m.end())
    if intent.order:  # "the newest model in my whole collection": of every checkpoint, no place
        for m in ACROSS_ALL.finditer(text):
            take(m.start(), m.end())
    return taken


_OR = re.compile(r"\s*(?:,?\s*(?:or|and/or)|/|,)\s*(?:(?:the|a)\s+)?$", re.I)  # "v1 or v2"
# "2nd or 3rd version", "version 1 or 2": a bare number or ordinal on either side of "or" names a version too.
_LEFT_ALTERNATIVE = re.compile(r"\b(?:v\.?\s?)?(\d{1,2})(?:st|nd|rd|th)?\s*(?:or|/)\s*$|\b(" + "|".join(_ORDINALS) + r")\s+or\s+$", re.I)
_RIGHT_ALTERNATIVE = re.compile(r"\s*(?:or|/)\s*(?:v\.?\s?)?(\d{1,2})\b", re.I)


def _part_of_a_term(text: str, start: int, end: int, vocabulary: CatalogVocabulary) -> bool:
    """Whether the words at start..end and the word right before or after them are a catalog term
    ("from the spring fete": the phrase's "from the" is no part of it)."""
    words = term_key(text[start:end])
    while len(words) > 1 and words[0] in STOP_WORDS:
        words = words[1:]
    before, after = re.search(r"(\w+)[\s-]+$", text[:start]), re.match(r"[\s-]+(\w+)", text[end:])
    joined = ([(*term_key(before.group(1)), *words)] if before else []) + ([(*words, *term_key(after.group(1)))] if after else [])
    return any(key in table for key in joined for table in vocabulary.terms.values())


def _version_alternatives(intent: Intent, taken: list[bool]) -> None:
    """"v1 or v2", "2nd or 3rd version": versions joined by "or" are one constraint that either meets
    (a frozenset of numbers), not two that no checkpoint can meet at once."""
    merged: list[Constraint] = []
    for c in sorted(intent.constraints, key=lambda c: c.start):
        last = merged[-1] if merged else None
        bare = _LEFT_ALTERNATIVE.search(intent.text[:c.start]) if c.attribute == "version" else None
        if last is not None and c.attribute == last.attribute == "version" and _OR.fullmatch(intent.text[last.end:c.start]):
            merged[-1] = replace(last, value=_as_alternatives(last.value) | _as_alternatives(c.value), words=intent.text[last.start:c.end], end=c.end)
        elif bare and not any(taken[bare.start():bare.end()]):
            number = int(bare.group(1)) if bare.group(1) else _ORDINALS.index(bare.group(2).lower()) + 1
            merged.append(replace(c, value=_as_alternatives(c.value) | {number}, words=intent.text[bare.start():c.end], start=bare.start()))
            taken[bare.start():c.start] = [True] * (c.start - bare.start())
        else:
            merged.append(c)
        after = _RIGHT_ALTERNATIVE.match(intent.text, merged[-1].end) if merged[-1].attribute == "version" else None
        if after and not any(taken[after.start():after.end()]):  # "version 1 or 2"
            last = merged[-1]
            merged[-1] = replace(last, value=_as_alternatives(last.value) | {int(after.group(1))}, words=intent.text[last.start:after.end()], end=after.end())
            taken[after.start():after.end()] = [True] * (after.end() - after.start())
        if merged[-1].attribute != "version":
            continue
        last = merged[-1]
        than = _THAN.search(intent.text[:last.start])
        beyond = _OR_BEYOND.match(intent.text, last.end)
        if than and not any(taken[than.start():than.end()]):  # "newer than v2": every later version, not v2 itself
            versions = _versions_past(_as_alternatives(last.value), than.group(1), inclusive=False)
            merged[-1] = replace(last, value=versions, words=intent.text[than.start():last.end], start=than.start())
            taken[than.start():last.start] = [True] * (last.start - than.start())
        elif beyond and not any(taken[beyond.start():beyond.end()]):  # "v2 or later", "version 3 and below"
            versions = _versions_past(_as_alternatives(last.value), beyond.group(1), inclusive=True)
            merged[-1] = replace(last, value=versions, words=intent.text[last.start:beyond.end()], end=beyond.end())
            taken[beyond.start():beyond.end()] = [True] * (beyond.end() - beyond.start())
    intent.constraints = merged


def _versions_past(numbers: frozenset, direction: str | None, inclusive: bool) -> frozenset:
    """Every version after the highest of `numbers`, or before the lowest when `direction` is an
    earlier-word ("older", "below"), with those numbers themselves when `inclusive`."""
    if (direction or "").lower() in _EARLIER_WORDS:
        return frozenset(range(1, min(numbers) + inclusive))
    start = max(numbers) + (not inclusive)
    return frozenset(range(start, start + _MAX_VERSIONS))


# "v2 or later", "version 3 and up", "v2+", "v4 or earlier": every version from (or up to) that one
_BEYOND = r"(later|newer|above|up|higher|after|earlier|older|below|before|lower)"
_OR_BEYOND = re.compile(r"\s*(?:\+|(?:(?:or|and)\s+" + _BEYOND + r"|onwards?)\b)", re.I)
# "my second shoe or newer": an ordinal, its noun, and the direction
_NTH_OR_BEYOND = re.compile(r"(?:\s+(?!(?:or|and)\b)[\w-]+)?\s+((?:or|and)\s+" + _BEYOND + r")\b", re.I)
_EARLIER_WORDS = frozenset({"earlier", "older", "below", "before", "lower"})
# "newer than v2", "older than my version 3": every version past that one
_THAN = re.compile(r"\b(later|newer|higher|earlier|older|lower)\s+than\s+(?:the\s+|my\s+)?$", re.I)
_MAX_VERSIONS = 1000  # "or later" reaches every version a catalog may have


def _catalog_terms(intent: Intent, scan: _Scan, vocabulary: CatalogVocabulary) -> None:
    """The catalog's own subject, style and place terms, longest first."""
    toks, n = scan.toks, len(scan.toks)
    for i in range(n):
        if i in scan.used:
            continue
        for size in range(min(vocabulary.max_term_len, n - i), 0, -1):
            span = toks[i:i + size]
            if any(j in scan.used for j in range(i, i + size)) or not _adjacent(scan.text, span):
                continue
            key = tuple(t.key for t in span)
            hit = vocabulary.exact(key)
            if hit and not all(k in STOP_WORDS for k in key):
                if hit[0] == "subject" and not (i and vocabulary.is_compound(" ".join((toks[i - 1].key, *key)))):
                    hit = ("subject", vocabulary.with_kinds_below(hit[1]))  # not "a coffee <word>": a kind of its own
                _add(intent, hit, span, exact=True)
                scan.found.add(hit[0])
                scan.used.update(range(i, i + size))
                if hit[0] != "subject":
                    scan.modifiers.update(range(i, i + size))
                break
    for i in range(n - 1):  # "city streets", "pencil sketch": a plain word beside a place or style is part of it
        if not _adjacent(scan.text, toks[i:i + 2]):  # "the cat, paper style": a comma parts them
            continue
        if i in scan.used and i + 1 not in scan.used and _covered_by(intent, toks[i], "environment") \
                and _names_term(toks[i + 1], vocabulary) not in ("subject", "style"):  # "the barn dibber": a dibber in the barn
            scan.used.add(i + 1)  # ("in the snow pixelart": a look besides)
        if i in scan.used and i + 1 not in scan.used and _covered_by(intent, toks[i], "style") \
                and _MEDIUM_AFTER.fullmatch(scan.text, toks[i].end, toks[i + 1].end) \
                and _names_term(toks[i + 1], vocabulary) != "subject":
            scan.used.add(i + 1)  # "a fresco painting": the medium noun of the catalog's style, no look of its own
            # (unless it names the subject: "oil painting artwork" where artworks are a catalog subject)
        subject = next((c.value for c in intent.constraints if c.attribute == "subject" and c.start <= toks[i].start < c.end
                        and not isinstance(c.value, frozenset)), None)
        if subject is not None and i + 1 not in scan.used and vocabulary.is_above(toks[i + 1].key, "subject", subject):
            scan.used.add(i + 1)  # "a mangabey monkey": the kind the subject is, said after it, names no detail
        if i + 1 in scan.used and i not in scan.used and _covered_by(intent, toks[i + 1], "environment") \
                and vocabulary.is_compound(f"{toks[i].key} {toks[i + 1].key}"):
            scan.used.add(i)  # "rain forest": one noun for a kind of the catalog's place
        if i + 1 in scan.used and i not in scan.used and _covered_by(intent, toks[i + 1], "style") \
                and toks[i].key not in vocabulary.cue_words and toks[i].key not in STOP_WORDS \
                and not vocabulary.names_creature(toks[i].key) \
                and not (vocabulary.names_thing(toks[i].key) and not vocabulary.names_medium(toks[i].key)):  # "giraffe decal": a creature or thing is drawn
            scan.used.add(i)
            scan.modifiers.add(i)


def _names_term(tok: Token, vocabulary: CatalogVocabulary) -> str | None:
    """The attribute of the catalog term a word alone stands for ("dibber" for the garden dibber, a subject)."""
    return (vocabulary.similar(tok.text.lower()) or (None,))[0]


def _pairs(indices: list[int], scan: _Scan) -> list[tuple[int, int]]:
    """Two words side by side, both among `indices`."""
    return [(a, b) for run in _runs(sorted(indices), scan.toks, scan.text) for a, b in zip(run, run[1:])]


_ANYTHING_BEFORE = re.compile(r"\b(?:anything|something|smth|stuff)\s+$", re.I)
_DETAIL_BEFORE = re.compile(r"\b(?:with|w/?|holding|wearing|and)\s+(?:(?:the|a|an|some|its|his|her)\s+)?$", re.I)
# Idioms whose word describes nothing: "(as) long as it's blue", "any old thing from this year", "whichever is
# fine", "any style, any place"
_IDIOMS = re.compile(r"\b(?:as\s+)?(long|soon|good|far|well|much)\s+as\b|\bany\s+(old)\b|"
                     r"\b(?:is|are|be|its|it['’]s|thats|that['’]s)\s+(fine)\b|\bany\s+(place|location|setting)\b", re.I)
_COLOURED = re.compile(r"colou?r(?:ed)?", re.I)


def _cues_and_synonyms(intent: Intent, scan: _Scan, vocabulary: CatalogVocabulary) -> list[int]:
    """Description words become look cues; other words may be synonyms. Returns the words left unknown.

    Every unknown word (or two-word phrase) proposes a term; the strongest proposal per attribute
    wins, so "pencil" cannot take the subject slot from "seat". A two-word phrase may hold a
    description word ("oil paint", "leaded glass") only when it names a style or a place.
    """
    toks = scan.toks
    joined = [m.span(m.lastindex) for m in _IDIOMS.finditer(scan.text)]  # "as long as it's not blue": no long thing
    content = [i for i in range(len(toks)) if i not in scan.used and not toks[i].key.isdigit()
               and not any(a <= toks[i].start < b for a, b in joined) and (
        toks[i].key not in STOP_WORDS or _ARTICLE_BEFORE.search(scan.text[:toks[i].start]) and vocabulary.names_built_place(toks[i].key)
        and (toks[i].key in ENGLISH_STOP_WORDS or toks[i].key in DOMAIN_WORDS and _HEAD_END.match(scan.text, toks[i].end))
        or _starts_compound(i, scan, vocabulary))
        and not (i and _COLOURED.fullmatch(toks[i].text) and vocabulary.names_colour(toks[i - 1].key))]  # "white-colored": the white
    cues = {j for j in content if toks[j].key in vocabulary.cue_words and len(toks[j].key) > 1  # one letter of a hyphened name is no word
            and not _part_of_term(vocabulary, toks[j], scan.found)}
    # "wearing sunglasses": a verb before what it takes is no look of its own, unless what it takes is one too
    cues -= {j for j in cues if toks[j].key.endswith("ing") and j + 1 in content and j + 1 not in cues
             and vocabulary.is_noun(toks[j + 1].key) and _adjacent(scan.text, toks[j:j + 2])}
    # "the cobalt blue one": a colour after its survey shade is part of the shade's name; "a blue glaze",
    # where no card writes blue but only shades of it, asks for a glaze of that colour (see _absent_colour)
    cues -= {j for j in cues if toks[j].key in BASIC_COLOURS and (
        j - 1 in content and _after_its_shade(toks, j)
        or toks[j].key in vocabulary.shade_only_colours and j + 1 in cues)}
    # "hanging out at the bar", "lazing around": a phrasal verb says what the subject does, no look
    cues -= {j for j in cues if toks[j].key.endswith("ing") and _PARTICLE.match(scan.text, toks[j].end)}
    if "style" not in scan.found:  # "the stitched one": a word that reads as a style is that style, not only a card's word for it
        cues -= {j for j in cues if vocabulary.describes_a_style(toks[j].text.lower())}
    # "need it for a poster": what the picture is for is no look ("as a cartoon" may be one)
    cues -= {j for j in cues if (m := _PURPOSE.search(scan.text[:toks[j].start])) and m.group(0).lower().startswith("for")}
    # "open my checkpoints": a verb opening the message before what it takes is a command, no look
    # ("green one", "spotted one": a look before "one", though WordNet has verbs of both)
    cues -= {j for j in cues if all(t.key in CHAT_WORDS for t in toks[:j]) and _COMMAND.match(scan.text, toks[j].end)
             and not _ONE_AFTER_NAME.match(scan.text, toks[j].end) and _is_verb(toks[j].key, vocabulary)}
    # "over the sand": a place slot holding what one catalog place is made of names that place, even
    # where a description has the word too, as does another name of a catalog place ("in the loft" for a garret
    # where a card says "loft bed"); "a sand dollar" is one noun, no place
    matter = {j: hit for j in content if in_place_slot(scan.text, toks[j].start)
              and (hit := vocabulary.place_made_of(toks[j].key) or j in cues and vocabulary.place_named_alike(toks[j].key))
              and not (j + 1 in content and vocabulary.is_compound(f"{toks[j].key} {toks[j + 1].key}"))}
    cues -= matter.keys()
    # "but action painting": WordNet's two-word name of an art movement is one style, whose words are no looks
    cues -= {j for a, b in _pairs(content, scan) if vocabulary.names_art_style(f"{toks[a].key} {toks[b].key}") for j in (a, b)}
    compounds = [(a, b) for a, b in _compound_nouns(content, scan, vocabulary) if a not in cues]
    cues -= {b for _, b in compounds}  # "wheat field": no "field" of a description
    if "subject" not in scan.found:  # "tabby" of "tabby cat" in the subject slot names a subject, not a look, as does
        # "the bird" that heads its phrase where a description also says "bird": the kinds of bird the catalog has
        # "knitted hen", "the lino hen": how it was made, or a word for a catalog look, may stand before it
        looks = {j for j in content if toks[j].key.endswith("ed") and any(vocabulary.is_verb(v) for v in verb_stems(toks[j].key))
                 or j not in cues and (vocabulary.similar(toks[j].text.lower()) or ("",))[0] == "style"}
        cues -= {j for j in cues if scan.in_subject_slot(j, scan.modifiers | cues | looks) and (
            toks[j].key in vocabulary.subject_words
            or _HEAD_END.match(scan.text, toks[j].end) and not _DETAIL_BEFORE.search(scan.text[:toks[j].start])
            and vocabulary.names_kinds_of_subjects(toks[j].key))}  # ("the one with the bird" names a detail)
    shades = {j: vocabulary.shades_of(toks[j].key) for j in content if j not in cues}
    shades = {j: words for j, words in shades.items() if words}  # "blue" where a description says "navy"
    proposals = []
    for j in content:
        if j not in cues and j not in shades:
            hit = matter.get(j) or vocabulary.similar(toks[j].text.lower())
            if hit and not (hit[0] != "environment" and in_place_slot(scan.text, toks[j].start) and vocabulary.names_place(toks[j].key)):
                proposals.append((hit[2], hit[0], hit[1], (j,)))  # "in the rain" is a setting, never a look
    defined = []  # "a feather pen": the description word WordNet defines in these words
    for a, b in _pairs(content, scan):
        hit = vocabulary.similar(f"{toks[a].text} {toks[b].text}".lower())
        if hit is None and not cues & {a, b}:
            hit = vocabulary.defined_with_genus(f"{toks[a].key} {toks[b].key}")
            if hit and hit[0] == "cue":
                defined.append((hit[1], (a, b)))
                continue
        where = hit and hit[0] == "environment" and in_place_slot(scan.text, toks[a].start)  # "up in the bell tower"
        if hit and hit[0] != "subject" and not where and (
                _HEAD_END.match(scan.text, toks[b].end) and vocabulary.names_thing(toks[b].key)
                and not vocabulary.names_art_form(toks[b].key) and not vocabulary.names_matter(toks[b].key)
                and (vocabulary.similar(toks[b].text.lower()) or ())[:2] != hit[:2]
                or vocabulary.names_compound_thing(f"{toks[a].key} {toks[b].key}")
                or hit[0] == "style" and vocabulary.is_creature_noun(toks[a].key)):  # "a walrus decal": the walrus is drawn
            continue  # "embroidered unicorn", "wine glass": a thing to draw, no part of a style or a place ("opaque
            # watercolor", "folded paper", "wood inlay" are: what a thing is made of, or the style's own kind, is no thing drawn)
        singles = [p for p in proposals if p[3] in ((a,), (b,))]
        # "leaded glass" over its own "glass": the pair names the same term, and "leaded" nothing else;
        # "candy shop" over its own "candy" where "shop" names another term: the pair is as sure as "candy";
        # likewise over a word of it and one that names its term among others ("carved" names either carving)
        same = [p[0] for p in singles if hit and p[1:3] == hit[:2]]
        agree = [p for p in singles if hit and p[1] == hit[0] and isinstance(p[2], frozenset) and hit[1] in p[2]]
        strength = max(same) + 1e-6 if same and (len(singles) - len(agree) == 1 or len(same) == len(singles) or hit[2] >= max(same)) \
            else hit[2] if hit else 0.0  # each word alone names the one term the pair does
        pair = f"{toks[a].key} {toks[b].key}"  # "tape recorder", "police car": a compound noun is one word, cue or not
        if hit and strength > max((p[0] for p in singles), default=0.0) and (
                hit[0] != "subject" or not cues & {a, b} or vocabulary.is_compound(pair)):
            proposals.append((strength, hit[0], hit[1], (a, b)))
    # "pen sketch" where a card says pencil sketch, "straw man" where one says straw hat: one
    # word alone names no term its neighbour makes another kind of; where that term is a style or
    # a place, the two words ask for a look or a setting the catalog lacks ("a concert poster")
    other_kinds = {}
    for p in proposals:
        for pair in ((p[3][0] - 1, p[3][0]), (p[3][0], p[3][0] + 1)) if len(p[3]) == 1 else ():
            if pair[0] in content and pair[1] in content and _adjacent(scan.text, toks[pair[0]:pair[1] + 1]) \
                    and vocabulary.other_kind_of_term(f"{toks[pair[0]].key} {toks[pair[1]].key}", p[1], p[2]):
                other_kinds[p] = pair
    proposals = [p for p in proposals if p not in other_kinds]
    for a, b in compounds:  # a compound for a kind the catalog lacks: its last word alone names no term then, nor its
        # first a subject WordNet tells the compound from (a turbine driven by the wind is no mill driven by it)
        whole = vocabulary.similar(f"{toks[a].text} {toks[b].text}".lower())
        compound = f"{toks[a].key} {toks[b].key}"
        proposals = [p for p in proposals if not ((p[3] == (b,) or p[3] == (a,) and p[1] == "subject" and vocabulary.tells_apart(compound, p[1], p[2]))
                                                  and (whole or ())[:2] != p[1:3])]
    scan.modifiers |= cues
    resolved: set[int] = set()
    deferred = []
    for proposal in sorted(proposals, key=lambda p: -p[0]):
        _, attribute, key, span = proposal
        if resolved.intersection(span) or (attribute in scan.found and not _may_add_second(intent, attribute, scan.text, toks[span[0]])):
            continue
        excluded = _EXCLUSION.search(scan.text[:toks[span[0]].start])  # "but not a fish" is a subject's slot too
        if attribute == "subject" and not scan.in_subject_slot(span[0]) and not excluded:
            deferred.append(proposal)  # a weaker style or place may yet fill the words before it
            continue
        _add(intent, (attribute, key), [toks[j] for j in span], exact=False)
        scan.found.add(attribute)
        resolved.update(span)
        if attribute != "subject":
            scan.modifiers.update(span)
    for _, attribute, key, span in deferred:  # "my oil paint grizzly": the subject after its style; "8-bit kitty": the head noun
        if "subject" not in scan.found and not resolved.intersection(span) and (
                scan.in_subject_slot(span[0]) or (len(span) == 1 and _HEAD_END.match(scan.text, toks[span[0]].end))):
            _add(intent, (attribute, key), [toks[j] for j in span], exact=False)
            scan.found.add(attribute)
            resolved.update(span)
    for (_, attribute, _, _), span in other_kinds.items():
        if attribute != "subject" and attribute not in scan.found and not resolved.intersection(span):
            _add(intent, ("unknown", f"{toks[span[0]].key} {toks[span[1]].key}"), [toks[j] for j in span], exact=True)
            resolved.update(span)
    for word, span in defined:
        if not resolved.intersection(span):
            intent.constraints.append(Constraint("cue", word, f"{toks[span[0]].text} {toks[span[1]].text}", toks[span[0]].start, toks[span[1]].end))
            resolved.update(span)
    subject = intent.subject
    for j, words in shades.items():
        if j in resolved:
            continue  # "white whale": the colour is part of a name
        intent.constraints.append(Constraint("cue", words, toks[j].text, toks[j].start, toks[j].end))
    styles = {c.start for c in intent.constraints if c.attribute == "style"}
    # "painted in watercolour", "drawn as pixel art": how the style is made; alone, no look of its own
    # (beside other description words it stays in their bag, where a card needs only some of them)
    made = {j for j in cues - resolved if toks[j].text.lower().endswith(("ed", "en", "wn"))
            and (m := _BEFORE_STYLE.match(scan.text, toks[j].end)) and m.end() in styles}
    for j in sorted(cues - resolved - (made if made == cues - resolved else set())):
        tok = toks[j]
        if subject is not None and vocabulary.names_every_card_of(tok.key, subject.value):
            continue  # "house kitty" where every cat is also a "house cat": no look that tells one apart
        if _hyphened_to_style(intent, scan, j):
            continue  # "the watercolor-style ones": a word joined to the style's own word describes that style
        alike = vocabulary.synonym_forms(tok.key)  # "floating", where one card floats and another drifts
        pose = tok.key.endswith(("ing", "ed")) and bool(_POSE_BEFORE_PLACE.match(scan.text, tok.end))
        intent.constraints.append(Constraint("cue", frozenset({tok.key, *alike}) if alike else tok.key, tok.text, tok.start, tok.end,
                                             optional=pose))
    return [j for j in content if j not in resolved and j not in cues and j not in shades]


def _hyphened_to_style(intent: Intent, scan: _Scan, j: int) -> bool:
    """Whether a word is one of a hyphen-joined run ("pixel-and-grid") in which another word named a style."""
    toks, text = scan.toks, scan.text
    first = last = j
    while first > 0 and text[toks[first - 1].end:toks[first].start] == "-":
        first -= 1
    while last + 1 < len(toks) and text[toks[last].end:toks[last + 1].start] == "-":
        last += 1
    run = {k for k in range(first, last + 1) if k != j}
    return any(c.attribute == "style" and c.start <= toks[k].start < c.end for c in intent.constraints for k in run)


# "down in a mine", "by the old mill", "on a train": after an article an English stop word, or a word
# about making checkpoints ending its phrase, is a noun, a place if it names one ("train a model" has no
# article before it; "the train shed" is a shed).
_ARTICLE_BEFORE = re.compile(r"\b(?:a|an|the)\s+$", re.I)
_WHERE_OR_HOW_AFTER = re.compile(r"\s+(?:in|on|at|by|under|over)\s", re.I)
_PARTICLE = re.compile(r"\s+(?:out|around|about)\b", re.I)


# "sitting on a shelf", "parked at the dock": a participle before a place says how the subject is
# there, a pose the owner may remember loosely ("sitting" for a card's "waiting")
_POSE_BEFORE_PLACE = re.compile(r"\s+(?:on|in|at|by|among|beside|near|under|inside|atop|next\s+to|outside)\b", re.I)


# What joins a verb to the style it was made in: "painted in", "drawn as a", "done with".
_BEFORE_STYLE = re.compile(r"\s+(?:in|as|with|by)\s+(?:an?\s+|the\s+)?", re.I)  # "drawn by a plotter"


# What may follow the noun a request ends its noun phrase with: the end, a comma, a preposition or
# clause word, or a closing "pls" or "thx" ("the lino hen pls": the hen is drawn).
_HEAD_END = re.compile(r"\s*(?:$|[,.!?;]|(?:in|at|on|by|with|from|of|for|that|which|who|but|except|not)\b|"
                       r"(?:pls|plz|please|thx|thanks|ty)\W*$)", re.I)
_THE_BEFORE = re.compile(r"\bthe\s+$", re.I)
_ONE_AFTER_NAME = re.compile(r"\s+ones?\b", re.I)  # "the kendama one": a name before "one" ends its phrase too


def _starts_compound(i: int, scan: _Scan, vocabulary: CatalogVocabulary) -> bool:
    """"a full moon", "the back door": a stop word is a word of the one noun WordNet knows it as with
    the word after it."""
    toks = scan.toks
    return toks[i].key in ENGLISH_STOP_WORDS and i + 1 < len(toks) and i + 1 not in scan.used and toks[i + 1].key not in STOP_WORDS \
        and _adjacent(scan.text, toks[i:i + 2]) and vocabulary.is_open_compound(f"{toks[i].key} {toks[i + 1].key}")


def _compound_nouns(content: list[int], scan: _Scan, vocabulary: CatalogVocabulary) -> set[tuple[int, int]]:
    """Adjacent words that WordNet knows as one noun ("wheat field", "tape recorder") and no description
    says: the pair names one thing, so its last word alone is no look the description names (a field
    in a description is no wheat field), unless the first word is one too ("knit hat" for a knitted one)."""
    pairs: set[tuple[int, int]] = set()
    for run in _runs(content, scan.toks, scan.text):
        for a, b in zip(run, run[1:]):
            keys = (scan.toks[a].key, scan.toks[b].key)
            if not ({a, b} & {j for pair in pairs for j in pair}) and keys not in vocabulary.description_pairs \
                    and vocabulary.is_compound(" ".join(keys)):
                pairs.add((a, b))
    return pairs


def _may_add_second(intent: Intent, attribute: str, text: str, tok: Token) -> bool:
    """Whether a second term of an attribute may join the first: "not watercolour... not the pixel one"
    rules out two styles, "not cartoon, watercolour" rules one out and asks for the other, and
    "cartoon or pixel" asks for either."""
    def ruled_out(start: int) -> bool:
        return bool(_EXCLUSION.search(text[:start]))
    return ruled_out(tok.start) or any(c.attribute == attribute and (ruled_out(c.start) or 0 <= c.end <= tok.start and _OR_BETWEEN.fullmatch(text[c.end:tok.start]))
                                       for c in intent.constraints)  # "photoreal or pixel": either


def _part_of_term(vocabulary: CatalogVocabulary, tok: Token, found: set[str]) -> bool:
    """"pixel" for the style pixel art: a word of a longer style or place term stands for that term,
    even where descriptions also hold it, so a follow-up "the pixel one" replaces the earlier style.
    Where the request already named that attribute ("except cartoon or pixel") it stays a description
    word, which the list's negation can still reach."""
    hit = vocabulary.similar(tok.text.lower())
    return hit is not None and hit[0] not in found and hit[0] != "subject" and (
        (len(hit[1]) > 1 and tok.key in hit[1]) or hit[2] >= SPELLING_MIN_RATIO)


def _add(intent: Intent, hit: tuple[str, object], span: list[Token], exact: bool) -> None:
    start, end = span[0].start, span[-1].end
    intent.constraints.append(Constraint(hit[0], hit[1], intent.text[start:end], start, end, exact))


def _adjacent(text: str, span: list[Token]) -> bool:
    """Tokens of one term must be separated by spaces or hyphens only ("3d render", "snow-covered"), or
    a possessive's "'s" ("dealer's choice" is one noun like "dealers choice")."""
    return all(re.fullmatch(r"(?:['’]s)?[\s\-]*", text[a.end:b.start]) for a, b in zip(span, span[1:]))


def _covered_by(intent: Intent, tok: Token, attribute: str | None = None) -> bool:
    return any(attribute in (None, c.attribute) and c.start <= tok.start and tok.end <= c.end for c in intent.constraints)


def _runs(indices: list[int], toks: list[Token], text: str) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][-1] == i - 1 and _adjacent(text, [toks[i - 1], toks[i]]):
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs

