"""Check-in: pick the checkpoint a request means, ask when several fit, say so when none does.

`CheckIn(store).ask(text, now=...)` runs the pipeline of issue 3: intent parsing, hybrid retrieval
fused with structured filters, deterministic reasoning, an optional LiteLLM reranker that can only
choose among checkpoints that satisfy the request, clarification, and the trigger rewrite.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from personalq.checkin.intent import ACROSS_ALL, MANY_OF_THEM, PLURAL_ONES, Constraint, Intent, heads_a_thing_phrase, parse_intent
from personalq.checkin.retrieval import hybrid_search
from personalq.checkin.rewrite import rewrite_named, rewrite_prompt
from personalq.checkin.snapshot import CatalogSnapshot
from personalq.checkin.timewords import TimeWindow
from personalq.checkin.vocabulary import STOP_WORDS, CatalogVocabulary, norm, term_key, tokens

MAX_OPTIONS = 4
_PICK_OPTION = re.compile(r"^\s*(?:the\s+)?(first|second|third|fourth|1|2|3|4)(?:\s+one)?\s*[.!]?\s*$", re.I)
_BARE_NUMBER = re.compile(r"\s*\d{1,2}\s*")  # "3" where two were offered: no option's place, a version (not "2025", a year)
_NUMBER_WORDS = {w: n for n, w in enumerate("two three four five six seven eight nine ten".split(), start=2)}  # "four": v4 ("one" is any one)
# "the <look> one", "the <place> version": one checkpoint, named by the words between.
_THE_DESCRIBED_ONE = r"\bthe\s+((?:[\w-]+\s+){1,3}?)(?:one|version)\b"
# "the <subject> before the <look> one", "the one right after the <place> version": the version next
# to the one the words describe, among its subject's versions.
_BESIDE_DESCRIBED = re.compile(r"\b(?:the\s+one\s+)?(?:(?:made|right|just)\s+)?(before|after)\s+" + _THE_DESCRIBED_ONE, re.I)
# A reply tied to the earlier request: "and ...", "but ...", "actually ..." first, or "same", "instead",
# "make it", "switch to" anywhere ("now the lynx in the same style", "ok make it a lynx").
_SAME = re.compile(r"^\W*(?:\w+\W+){0,2}?(?:same|also|too|and|but|instead)\b|\b(?:same|instead|make\s+it|switch\s+to|change\s+(?:it\s+)?to|(?:that|this)\s+(?:style|look))\b", re.I)
# "same but on the beach", "and in the snow?", "the cartoon version of that": everything else stays,
# even when nothing then fits ("same style but the lynx" keeps only the style, and keeps it).
_OF_THAT = re.compile(r"\bof\s+(?:that|it|this)\b", re.I)
_KEEP_THE_REST = re.compile(r"\bsame\b|^\W*(?:(?:hmm+|ok|okay|so)\W+)?and\b|" + _OF_THAT.pattern, re.I)
# "same but the <look> one", "same <subject> but the <look> version": "the ... one" names a checkpoint
# that is, so an earlier look or place that no such checkpoint has gives way, while "same but <look>"
# and "and the <look> version of that?" keep the rest.
_THE_NAMED_ONE = re.compile(_THE_DESCRIBED_ONE, re.I)
# "same animal but the newest one", "same dye style but ...", "a different subject": the one or two
# words after "same" or "different" may name an attribute of the earlier request.
_SAME_ATTRIBUTE = re.compile(r"\bsame\s+(\w+)(?:\s+(\w+))?", re.I)
_OTHER_ATTRIBUTE = re.compile(r"\b(?:different|another|other)\s+(\w+)(?:\s+(\w+))?", re.I)
_ATTRIBUTE_WORDS = {"style": "style", "look": "style", "vibe": "style", "aesthetic": "style", "medium": "style",
                    "place": "environment", "setting": "environment", "spot": "environment", "location": "environment",
                    "background": "environment", "scene": "environment",
                    "subject": "subject", "animal": "subject", "creature": "subject", "critter": "subject", "character": "subject"}
_A_THING = r"(?:a|an|any|some)\s+[\w-]+\s+thing"  # "a neon thing"
# "actually anything in the forest", "something done in watercolor": any subject, where the setting or look is
_ANY_SUBJECT = re.compile(rf"\b(?:anything|something|{_A_THING})\s+(?:in|at|on|by|near|under|inside|set|made|done|drawn|painted)\b|"
                          rf"\b(?:{_A_THING}|(?:anything|something)\s+(?!else\b)[\w-]+(?<!er))\s*(?:$|[,.!?])|"  # "anything fresco", not "anything newer"
                          r"\b(?:any|whatever)\s+subject\b|\bother\s+(?:\w+\s+){1,2}" + MANY_OF_THEM + r"\b|\b(?:what|anything)\s+else\b",
                          re.I)  # "what other watercolor ones", "other cartoon pics?", "what else is on the beach?"; "the other ones" keep it
# "any bear from 2025", "any watercolor bear": any checkpoint of the subject, whatever was asked before
_ANY_BEFORE = re.compile(r"\bany\s+(?:\w+\s+){0,2}$", re.I)
# "nah the horse", "actually the cat": a reply that opens by turning the question down
_TURNING_DOWN = re.compile(r"^\W*(?:(?:hmm+|oh|ah|uh|wait)\W+)?(?:no|nah|nope|actually)\b", re.I)
_LOOK_ONES_INSTEAD = re.compile(r"\b(?:ones|stuff)\s+instead\b", re.I)  # not "the older ones instead", which has no look
_INDEFINITE = re.compile(r"\b(?:a|an|some|any)\s+$", re.I)  # "give me a cat": any cat, not the one offered
_ANY_ONE_OF = re.compile(r"\b(?:a|an|some|any)\s+(?:[\w-]+\s+){0,3}$", re.I)  # "do i have a blue walrus": any such one
# "nvm", "scratch that", "forget it": the user drops the open request and starts another.
_START_OVER = re.compile(r"^\W*(?:(?:ok|okay|no|nah|hmm+|oh|ah|wait|actually|so)\W+)*(?:(?:nvm|never\s*mind|(?:scratch|scrap|ditch|drop)\s+(?:that|this|it)|"
                         r"forget\s+(?:it|that|this)|start\s+over|new\s+(?:request|search)|change\s+of\s+plans?|(?:a\s+)?different\s+question|"
                         r"(?:something|a)\s+(?:else|(?:totally\s+|completely\s+)?different(?:\s+thing)?)\s+entirely|(?:totally\s+|completely\s+)?different\s+thing(?:\s+entirely)?)\b\W*|"
                         r"(?:(?:something|a|an)\s+)?(?:totally\s+|completely\s+)?(?:new|different|else|unrelated|another|instead)(?:\s+(?:one|thing|request|question|q|idea))?\s*[:\-]\W*)", re.I)
# "forget flowers, any cartoon one": what is forgotten, then the request that replaces it
_FORGET = re.compile(r"^\W*(?:(?:ok|okay|no|nah|hmm+|actually|so)\W+)*forget\s+(?:about\s+)?([\w\s'-]+?)\s*[,;:.]+\s*(?=\w)", re.I)
_OPTION_INDEX = {"first": 0, "second": 1, "third": 2, "fourth": 3, "1": 0, "2": 1, "3": 2, "4": 3}
# An answer's word for a thing the catalog lacks names the offered subject whose cards' descriptions
# MiniLM puts nearest to it, when the next option is at least this much further (cosine).
OPTION_MEANING_MARGIN = 0.05
OPTION_MEANING_QUERY = "a photo of a {}"


@dataclass
class ClarificationOption:
    """One answer the user can click: a value of the splitting attribute and the checkpoints it keeps."""

    label: str
    checkpoint_ids: list[str]
    attribute: str
    value: str


@dataclass
class CheckInResult:
    action: str  # select | clarify | no_match
    reason: str
    checkpoint_id: str | None = None
    card: Any = None
    question: str | None = None
    options: list[ClarificationOption] = field(default_factory=list)
    rewritten_prompt: str | None = None
    nearest: list[str] = field(default_factory=list)
    plausible_ids: list[str] = field(default_factory=list)
    decided_by: str = "rules"  # rules | llm

    def to_dict(self) -> dict:
        """JSON-ready: everything but the card object (its id is `checkpoint_id`)."""
        return {f.name: getattr(self, f.name) if f.name != "options" else [asdict(o) for o in self.options]
                for f in fields(self) if f.name != "card"}


def _utc(now: datetime | str | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    if isinstance(now, str):
        now = datetime.fromisoformat(now.replace("Z", "+00:00"))
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


class CheckIn:
    def __init__(self, store, k: int = 10, reranker=None, use_retrieval: bool = True):
        self.store, self.k, self.reranker, self.use_retrieval = store, k, reranker, use_retrieval
        self._snapshot: CatalogSnapshot | None = None

    def refresh(self) -> CatalogSnapshot:
        """The cards as of the store's current revision (rebuilt only when the catalog changed).

        Called once per turn; the rest of the turn reads `snapshot` without asking the database again.
        """
        revision = getattr(self.store, "revision", None)
        if self._snapshot is None or self._snapshot.revision != revision:
            self._snapshot = CatalogSnapshot(self.store.cards(), getattr(self.store, "embedder", None), revision)
        return self._snapshot

    @property
    def snapshot(self) -> CatalogSnapshot:
        return self._snapshot if self._snapshot is not None else self.refresh()

    def ask(self, text: str, now: datetime | str | None = None, candidate_pool=None) -> CheckInResult:
        return self.conversation(now, candidate_pool).ask(text)

    def conversation(self, now: datetime | str | None = None, candidate_pool=None) -> Conversation:
        return Conversation(self, _utc(now), candidate_pool)

    def read(self, text: str, intent: Intent) -> Intent:
        """Rules first; when words remain unexplained and an LLM is configured, its reading (catalog
        terms only, schema-checked) adds the attributes the rules did not find."""
        read = getattr(self.reranker, "read", None)
        if read is None or not intent.unexplained:
            return intent
        vocabulary = self.snapshot.vocabulary
        terms = {a: sorted({vocabulary.labels[(a, k)] for k in vocabulary.terms[a]}) for a in vocabulary.ATTRIBUTES}
        reading = read(text, terms)
        if reading is None:
            return intent
        found = {c.attribute for c in intent.constraints if not c.excluded}
        added = []
        for attribute in vocabulary.ATTRIBUTES:
            label = getattr(reading, attribute)
            if label is not None and attribute not in found:
                added.append(Constraint(attribute, term_key(label), label, exact=False))
        for label in reading.exclude:
            hit = vocabulary.exact(term_key(label))
            if hit:
                added.append(Constraint(hit[0], hit[1], label, exact=False, excluded=True))
        if added:
            intent.constraints = [c for c in intent.constraints if c.attribute != "unknown"] + added
        return intent

    # -- the decision ----------------------------------------------------------------------------
    def decide(self, request: str, intent: Intent, now: datetime, pool: set[str] | None) -> CheckInResult:
        """The decision over the constraints; when none fits, once more without the optional ones
        (a pose: "the dog sitting on the beach" where the beach dogs' cards say nothing of sitting)."""
        result = self._decide(request, intent, now, pool)
        required = [c for c in intent.constraints if not c.optional]
        if result.action == "no_match" and len(required) < len(intent.constraints):
            relaxed = self._decide(request, replace(intent, constraints=required), now, pool)
            return result if relaxed.action == "no_match" else relaxed
        return result

    def _decide(self, request: str, intent: Intent, now: datetime, pool: set[str] | None) -> CheckInResult:
        snap = self.snapshot
        base = set(snap.ids) if pool is None else pool & snap.cards.keys()
        sets = _exclusions_as_descriptions([(c, snap.matching(c)) for c in intent.constraints], snap.vocabulary)
        cues = [ids for c, ids in sets if c.attribute == "cue" and not c.excluded]
        satisfying = set(base)
        for c, ids in sorted(sets, key=lambda s: len(s[1])):
            if len(cues) > 1 and c.attribute == "cue" and not c.excluded:
                continue  # description words count together, below
            satisfying = satisfying - ids if c.excluded else satisfying & ids
        if len(cues) > 1:
            satisfying = _most_cues(satisfying, cues)
        if intent.ruled_out_order and (len(satisfying) > 1 or pool is None):  # an answer keeps its one offered fit
            # "mountain v1 or v2, not the newest": the newest mountain, which the rest may already rule out
            field_name, pick = intent.ruled_out_order
            scope = set(base).intersection(*(ids for c, ids in sets if c.attribute == "subject" and not c.excluded))
            first = (max if pick == "max" else min)(scope or satisfying, key=lambda i: snap.moment(i, field_name) or 0)
            satisfying = satisfying - {first}
        if intent.order and satisfying:
            field_name, pick = intent.order
            # "the one I use most" among checkpoints never used has no answer: a zero count never leads
            dated = sorted(i for i in satisfying if snap.moment(i, field_name) not in (None, 0 if pick == "max" else None))
            dated.sort(key=lambda i: snap.moment(i, field_name), reverse=pick == "max")
            tied = [i for i in dated if snap.moment(i, field_name) == snap.moment(dated[0], field_name)]
            if intent.order_rank == 0 and len(tied) > 1:
                satisfying = set(tied)  # a tie for first (used last at one moment, or as often): the user says which
            elif len(dated) > intent.order_rank:
                chosen = dated[intent.order_rank]
                return self._select(request, intent, chosen, f"the {intent.order_words} of {len(satisfying)} that fit")
            elif not dated and field_name != "created":
                noun = intent.subject.words if intent.subject else "checkpoint"
                near = self._rank(request, satisfying, shown=3)[:3]
                return CheckInResult("no_match", f"no {noun} that fits has ever been used", nearest=near)
            else:
                satisfying = set()
        if not satisfying:
            return self._no_match(request, intent, sets, base)
        ranked = self._rank(request, satisfying)
        if len(ranked) == 1:
            return self._select(request, intent, ranked[0], self._why(intent))
        if self.reranker is not None:
            outcome = self.reranker.choose(request, [snap.cards[i] for i in ranked])
            if outcome.checkpoint_id in ranked:
                result = self._select(request, intent, outcome.checkpoint_id, f"chosen by {self.reranker.name} among {len(ranked)} that fit")
                result.decided_by = "llm"
                return result
            result = self._clarify(intent, ranked)
            result.reason += f" ({self.reranker.name}: {outcome.status}{', ' + outcome.detail if outcome.detail else ''})"
            return result
        return self._clarify(intent, ranked)

    def _rank(self, request: str, satisfying: set[str], shown: int = MAX_OPTIONS) -> list[str]:
        """Satisfying checkpoints, best retrieval match first, then newest first.

        Retrieval only decides which come first, so it runs only when more fit than can be shown.
        """
        snap = self.snapshot
        rank: dict[str, int] = {}
        if self.use_retrieval and len(satisfying) > shown:
            ids = satisfying if len(satisfying) < len(snap.ids) else None
            hits = hybrid_search(self.store, request, self.k, ids=ids)
            rank = {doc_id: r for r, (doc_id, _) in enumerate(hits)}
        return sorted(satisfying, key=lambda i: (rank.get(i, len(rank)), -snap.cards[i].created_at.timestamp()))

    def _why(self, intent: Intent) -> str:
        """The user's words, with the catalog term each synonym was read as: “kitty” (as cat), not “cartoon”."""
        words = [("not " if c.excluded else "") + f"“{c.words}”" + ("" if c.exact else f" (as {_term_label(c.value)})") for c in intent.constraints]
        return "the only checkpoint that fits " + (", ".join(words) if words else "the request")

    def _select(self, request: str, intent: Intent, checkpoint_id: str, reason: str) -> CheckInResult:
        card = self.snapshot.cards[checkpoint_id]
        subject_words = [c.words for c in intent.constraints if c.attribute == "subject" and c.start >= 0]
        return CheckInResult(
            action="select", reason=reason, checkpoint_id=checkpoint_id, card=card,
            rewritten_prompt=rewrite_prompt(request, card.trigger, subject_words), plausible_ids=[checkpoint_id],
        )

    def _no_match(self, request: str, intent: Intent, sets: list[tuple[Constraint, set[str]]], base: set[str]) -> CheckInResult:
        unknown = next((c for c, _ in sets if c.attribute == "unknown" and not c.excluded), None)
        if unknown is not None and intent.subject is None:  # "my giraffe": nothing to relax towards
            near = [i for i, _ in hybrid_search(self.store, request, 3)] if self.use_retrieval else []
            return CheckInResult("no_match", f"no checkpoint in the repository shows “{unknown.words}”", nearest=near)
        if not base:
            return CheckInResult("no_match", "none of the offered checkpoints is in the repository")
        # The subject is what the user wants drawn: blame any other constraint before it.
        for i, (c, _) in sorted(enumerate(sets), key=lambda s: s[1][0].attribute == "subject"):
            rest = set(base)
            for j, (other, ids) in enumerate(sets):
                if j != i:
                    rest = rest - ids if other.excluded else rest & ids
            if rest:
                noun = intent.subject.words if intent.subject and intent.subject is not c else "checkpoint"
                near = self._rank(request, rest, shown=3)[:3]
                if intent.order and not any(self.snapshot.moment(x, intent.order[0]) for x in rest):
                    return CheckInResult("no_match", f"no {noun} has ever been used", nearest=near)
                return CheckInResult("no_match", f"no {noun} fits “{c.words}”; {len(rest)} fit everything else", nearest=near)
        words = " + ".join(f"“{c.words}”" for c, _ in sets)
        return CheckInResult("no_match", f"no checkpoint fits {words} together")

    def _clarify(self, intent: Intent, ranked: list[str]) -> CheckInResult:
        noun = intent.subject.words if intent.subject else "one"
        attribute, groups = self._best_split(ranked, intent)
        # the best-matching groups, oldest first: "the second one" is then the second offered and the second made
        shown = sorted(list(groups.items())[:MAX_OPTIONS], key=lambda group: min(self.snapshot.cards[i].created_at for i in group[1]))
        options = [ClarificationOption(_label(attribute, value, noun), ids, attribute, value) for value, ids in shown]
        labels = [o.label for o in options]
        question = "Do you want " + (", ".join(labels[:-1]) + " or " + labels[-1]) + "?"
        if len(groups) > MAX_OPTIONS:
            question = question[:-1] + f" (or another of the {len(ranked)} that fit)?"
        return CheckInResult(
            "clarify", f"{len(ranked)} checkpoints fit; they differ most in {attribute}",
            question=question, options=options, plausible_ids=ranked,
        )

    def _best_split(self, ranked: list[str], intent: Intent) -> tuple[str, dict[str, list[str]]]:
        cards = [self.snapshot.cards[i] for i in ranked]
        asked = {c.attribute for c in intent.constraints}
        candidates = []
        for attribute in ("category", "style", "environment", "subject", "created", "version"):
            if attribute in asked and attribute not in ("subject", "created"):
                continue
            groups: dict[str, list[str]] = {}
            for card in cards:
                value = _attribute_value(card, attribute)
                if value is None:
                    break
                groups.setdefault(value, []).append(card.id)
            else:
                if len(groups) >= 2:
                    fits = len(groups) <= MAX_OPTIONS
                    # a request that names nothing to draw is asked what to draw, however many things fit
                    what_to_draw = attribute == "category" and intent.subject is None
                    candidates.append(((what_to_draw, fits, -max(map(len, groups.values())), len(groups)), attribute, groups))
        if not candidates:  # identical on every attribute: offer the checkpoints themselves, by age
            groups = {f"created {self.snapshot.cards[i].created_at:%B %d, %Y}": [i] for i in ranked}
            return "created", groups
        _, attribute, groups = max(candidates, key=lambda c: c[0])
        return attribute, groups


def _options_named(options: list[ClarificationOption], reply: str, vocabulary: CatalogVocabulary) -> list[ClarificationOption]:
    """The offered options whose value shares a word with the reply ("pixel" of a "pixel art" option),
    else those the reply names by another word for them or a broader one, in any of its senses, else
    by a part of one of their one-word terms ("the wrist one" for the wristwatch): only the offered options
    are meant, so "the machine" is the car offered (WordNet's rarer sense)."""
    words = {t.key for t in tokens(reply)}
    return [o for o in options if words & {t.key for t in tokens(o.value)}] or [
        o for o in options if any(vocabulary.names_in_any_sense(w, o.value) for w in words - STOP_WORDS)] or [
        o for o in options if any(vocabulary.part_of_a_term(w, o.checkpoint_ids) for w in words - STOP_WORDS)]


def _option_described(options: list[ClarificationOption], reply: str, snap: CatalogSnapshot, store) -> list[ClarificationOption]:
    """The one offered subject that a word for a thing the catalog lacks names as MiniLM reads the
    offered cards' descriptions ("the bird" for a kereru offered beside a bucket and a yak),
    nearer than the next by a margin. Never a subject WordNet tells apart from a narrow word, however
    near MiniLM puts the two ("the walrus" is no macaque), while a broad word may name a subject WordNet
    files elsewhere ("the flower" for a shrub); and never "a walrus" ("a blue walrus"), which asks for
    any one, not for one offered."""
    vocabulary = snap.vocabulary
    if vocabulary.lexicon is None or len(options) < 2:
        return []
    things = [t for t in tokens(reply) if t.key not in STOP_WORDS and vocabulary.exact(term_key(t.key)) is None
              and vocabulary.similar(t.key) is None and vocabulary.names_thing(t.key)]
    categories = [{snap.cards[i].category for i in o.checkpoint_ids} for o in options]
    if len(things) != 1 or _ANY_ONE_OF.search(reply[:things[0].start]) or any(len(c) != 1 for c in categories):
        return []
    subjects = [next(iter(c)) for c in categories]  # every card of each subject describes it, not only those offered
    ids = [i for i, card in snap.cards.items() if card.category in subjects]
    near = dict(store.dense_search(OPTION_MEANING_QUERY.format(things[0].key), len(ids), ids=ids))
    (best, n), (second, _) = sorted(((max(near.get(i, -1.0) for i in ids if snap.cards[i].category == subject), n)
                                     for n, subject in enumerate(subjects)), reverse=True)[:2]
    return [options[n]] if not vocabulary.files_apart(things[0].key, subjects[n]) and best - second >= OPTION_MEANING_MARGIN else []


def _fits_strict_terms(option: ClarificationOption, answer: Intent, snap: CatalogSnapshot) -> bool:
    """The option fits every catalog term and date the answer names exactly: "the spoon in the cellar"
    does not answer with the spoon offered when no spoon is in the cellar. Description words, words the
    catalog lacks and near words for a style or place may miss."""
    strict = [c for c in answer.constraints if not c.excluded and c.attribute not in ("cue", "unknown")
              and (c.exact or c.attribute not in ("style", "environment"))]
    return all(snap.matching(c) & set(option.checkpoint_ids) for c in strict)


def _options_fitting_most(options: list[ClarificationOption], answer: Intent, snap: CatalogSnapshot) -> list[ClarificationOption]:
    """The offered options that fit the most of an answer's words where none fits them all: "the
    wooden inlaid one" is the inlaid option, though no card says "wooden". An option must fit every
    catalog term and date the answer names; only description words, words the catalog lacks and near
    words for a style or place may miss, as an owner recalls details loosely ("the watercolor one on
    the river bend", "the one wading in the water")."""
    wanted = [c for c in answer.constraints if not c.excluded]
    terms = [c for c in wanted if c.attribute not in ("cue", "unknown")]
    matching = [(c, snap.matching(c)) for c in wanted]  # once per constraint, not per option

    def score(option: ClarificationOption) -> tuple[int, int]:  # terms first: a named style outweighs a detail
        if not _fits_strict_terms(option, answer, snap):
            return 0, 0
        fits = [c for c, ids in matching if ids & set(option.checkpoint_ids)]
        return sum(c in terms for c in fits), sum(c not in terms for c in fits)

    scores = [score(o) for o in options]
    best = max(scores, default=(0, 0))
    return [o for o, s in zip(options, scores) if s == best] if any(best) else []


def _attribute_named(first: str, second: str | None, vocabulary: CatalogVocabulary) -> str | None:
    """The attribute "same ..." or "different ..." names: the next word is a word for the attribute
    itself ("style", "place"), a catalog term or a word for one ("bear", "critter", "forest"); or
    the word after it is a word for the attribute ("same dye style"), but no term ("same but pixel art")."""
    hit = vocabulary.exact(term_key(first)) or vocabulary.similar(first.lower())
    return _ATTRIBUTE_WORDS.get(first.lower()) or (hit[0] if hit else None) or _ATTRIBUTE_WORDS.get((second or "").lower())


def _term_label(value) -> str:
    """A catalog term as words, or the categories a broader word stands for ("horse or dog")."""
    return " or ".join(sorted(" ".join(k) for k in value)) if isinstance(value, frozenset) else " ".join(value)


def _comparative_as_order(intent: Intent) -> Intent:
    """"the newer one" with nothing chosen to compare with (a first request, or after a question):
    the newest or oldest of those that fit; "one of the older ones" names none of them."""
    if intent.any_comparative or intent.ruled_out_order == ("created", "max" if intent.comparative == "older" else "min"):
        intent.comparative = ""  # "an older one, not the latest": older than the one ruled out, which says no more
    if intent.comparative and not intent.order:
        intent.order = ("created", "min" if intent.comparative == "older" else "max")
        intent.order_words, intent.comparative = intent.comparative, ""
    return intent


def _exclusions_as_descriptions(sets: list[tuple[Constraint, set[str]]], vocabulary: CatalogVocabulary) -> list[tuple[Constraint, set[str]]]:
    """"car minus the sedan one", where every car card also lists sedan as a subject: ruling the
    term out would leave no car at all, so the user means the cards whose descriptions say it."""
    wanted = [ids for c, ids in sets if c.attribute == "subject" and not c.excluded]
    scope = set.intersection(*wanted) if wanted else set()
    out = []
    for c, ids in sets:
        single_word = c.attribute in vocabulary.ATTRIBUTES and not isinstance(c.value, frozenset) and len(c.value) == 1
        word = c.value[0] if c.excluded and single_word else None  # "not the bird", any of several kinds, is no one word
        if scope and word in vocabulary.cue_words and scope <= ids:
            c, ids = replace(c, attribute="cue", value=word), vocabulary.cue_words[word]
        out.append((c, ids))
    return out


def _most_cues(satisfying: set[str], cues: list[set[str]]) -> set[str]:
    """The checkpoints whose descriptions hold the most of the request's description words (at least
    one): in "a lynx holding a banjo" the card may say "with a banjo", and "holding" belongs
    to another card, so several description words are a bag to overlap, not a list of filters."""
    counts = {i: sum(i in ids for ids in cues) for i in satisfying}
    best = max(counts.values(), default=0)
    return {i for i, n in counts.items() if n == best} if best else set()


def _attribute_value(card, attribute: str) -> str | None:
    if attribute == "category":
        return card.category
    if attribute == "style":
        return card.style_tags[0] if card.style_tags else None
    if attribute == "environment":
        return card.environment[0] if card.environment else None
    if attribute == "subject":
        specific = [s for s in card.subject_types if s.lower() != card.category.lower()]
        return specific[0] if specific else None
    if attribute == "created":
        return f"{calendar.month_name[card.created_at.month]} {card.created_at.year}"
    return f"v{card.version}" if card.version is not None else None


def _label(attribute: str, value: str, noun: str) -> str:
    if attribute in ("category", "subject"):
        return f"the {value}"
    if attribute == "created":
        return f"the {noun} from {value}"
    if attribute == "version":
        return f"{noun} {value}" if noun != "one" else f"version {value[1:]}"
    if attribute == "environment":
        return f"the {noun} trained on {value} pictures"
    return f"the {value} {noun}"


class Conversation:
    """One request and its follow-up answers; each answer narrows the checkpoints that still fit."""

    def __init__(self, checkin: CheckIn, now: datetime, candidate_pool=None):
        self.checkin, self.now = checkin, now
        self.pool = set(candidate_pool) if candidate_pool else None
        self.request: str | None = None
        self.intent: Intent | None = None
        self.last: CheckInResult | None = None

    def ask(self, text: str) -> CheckInResult:
        self.request = text
        snap = self.checkin.refresh()
        named = snap.named(text)
        if named is not None and (self.pool is None or named.id in self.pool):
            self.intent = Intent(text, [Constraint("checkpoints", frozenset({named.id}), named.id)])
            self.last = CheckInResult("select", f"you named {named.id}", checkpoint_id=named.id, card=named, plausible_ids=[named.id],
                                      rewritten_prompt=rewrite_named(text, [named.id, *named.triggers], named.trigger))
            return self.last
        self.intent = self.checkin.read(text, _comparative_as_order(parse_intent(text, snap.vocabulary, self.now)))
        self.last = self.checkin.decide(text, self.intent, self.now, self.pool)
        beside = _BESIDE_DESCRIBED.search(text)
        if beside and self.last.action == "select":
            self._beside_described(text, beside)
        return self.last

    def _beside_described(self, text: str, beside: re.Match) -> None:
        """"the <subject> before the <look> one": where the words after "before" describe one of the
        subject's checkpoints (no order word: "before the newest one" is read as an order), the answer
        is its subject's version right before or after that one, or none when it is the first or last."""
        snap = self.checkin.snapshot
        described = parse_intent(beside.group(2), snap.vocabulary, self.now)
        read_as_version = self.intent.order or any(c.attribute == "version" for c in self.intent.constraints)
        if read_as_version or described.order or not described.constraints:  # "the version before the current one"
            return
        card, before = snap.cards[self.last.checkpoint_id], beside.group(1).lower() == "before"
        if card.version is None:  # a card without a version has no place among its subject's versions
            return
        siblings = sorted((c for c in snap.cards.values() if c.category == card.category and c.version is not None
                           and (c.version < card.version if before else c.version > card.version)), key=lambda c: c.version, reverse=before)
        relation = f"{beside.group(1).lower()} {card.id}"
        if not siblings:
            self.last = CheckInResult("no_match", f"no {card.category} comes {relation}")
            return
        subject = [c for c in self.intent.constraints if c.attribute == "subject" and not c.excluded]  # for a follow-up's sake
        self.intent = Intent(text, [*subject, Constraint("checkpoints", frozenset({siblings[0].id}), beside.group(0))])
        self.last = self.checkin.decide(text, self.intent, self.now, self.pool)
        self.last.reason = f"the {card.category} right {relation}"

    def answer(self, reply: str | ClarificationOption) -> CheckInResult:
        """The next message: a clicked option or typed answer narrows the open question; a refinement
        ("no, the realistic one", "same but for the cat", "the older one") changes the earlier request;
        a new full request (another subject, no "same") starts a new selection."""
        if self.last is None:
            return self.ask(reply.label if isinstance(reply, ClarificationOption) else reply)
        asked = self.last.action == "clarify"
        snap = self.checkin.refresh()
        if isinstance(reply, str) and _START_OVER.match(reply):
            return self.ask(_START_OVER.sub("", reply, count=1) or reply)
        dropped = _FORGET.match(reply) if isinstance(reply, str) else None
        if dropped and parse_intent(dropped.group(1), snap.vocabulary, self.now).subject is not None:
            return self.ask(reply[dropped.end():])  # "forget the dog, do i have a giraffe?": a subject dropped, a new request
        if asked and isinstance(reply, str):
            m, word = _PICK_OPTION.match(reply), reply.strip(" .!").lower()
            if m and _OPTION_INDEX[m.group(1).lower()] < len(self.last.options):
                reply = self.last.options[_OPTION_INDEX[m.group(1).lower()]]
            elif _BARE_NUMBER.fullmatch(reply) or word in _NUMBER_WORDS:
                reply = f"v{_NUMBER_WORDS.get(word, reply.strip())}"
        if isinstance(reply, ClarificationOption):
            if not asked:
                return self.ask(reply.label)
            return self._narrow(Intent(reply.label, [Constraint("checkpoints", frozenset(reply.checkpoint_ids), reply.label)]))
        full = parse_intent(reply, snap.vocabulary, self.now)
        named = snap.named(reply) is not None
        if named or self._is_new_request(full, reply):
            return self._ask_anew(reply, full, named)
        follow = parse_intent(reply, snap.vocabulary, self.now, answer=True) if asked else full
        follow = self._about_last(follow)
        if asked and not follow.constraints and not follow.order:
            chosen = self._offered_named(reply)
            if len(chosen) != 1:
                if any(c.attribute == "unknown" and not c.excluded for c in full.constraints):
                    return self.ask(reply)  # "nah, do the parrot instead": no offered one, but a thing the catalog lacks
                self.last.reason = f"“{reply}” does not narrow it down"
                return self.last
            return self._narrow(Intent(reply, [Constraint("checkpoints", frozenset(chosen[0].checkpoint_ids), reply)]))
        if asked:  # an answer that fits an offered checkpoint answers the question; else it changes the request
            before, question = self.intent, self.last
            narrowed = self._narrow(follow)
            if narrowed.action != "no_match":
                return narrowed
            self.intent, self.last = before, question
            named = [o for o in self._offered_named(reply) if _fits_strict_terms(o, follow, snap)]
            if len(named) != 1:
                named = _options_fitting_most(question.options, follow, snap)
            if len(named) == 1:  # "the old pixel one": a word of one offered option's own label
                return self._narrow(Intent(reply, [Constraint("checkpoints", frozenset(named[0].checkpoint_ids), reply)]))
        chosen = self.last.checkpoint_id if self.last.action == "select" else None
        earlier, follow = self._same_or_other(reply, follow)
        self.intent = earlier.refined(follow)
        self.last = self.checkin.decide(self.request, self.intent, self.now, self.pool)
        # "same but on the beach" keeps the style; "same but the one with icebergs", only details, may drop the earlier place
        if self.last.action == "no_match" and (not _KEEP_THE_REST.search(reply) or all(c.attribute == "cue" for c in follow.constraints)):
            self._drop_earlier(follow, only=("cue",) if asked else None)
        elif self.last.action == "no_match" and _THE_NAMED_ONE.search(reply) and not _OF_THAT.search(reply):
            self._drop_earlier(follow)  # "<subject> on the <place>", then "same but the <look> one": the one that is so
        elif self.last.action == "no_match" and any(c.attribute == "style" and not c.excluded for c in follow.constraints):
            self._drop_earlier(follow, only=("version",))  # "horse v1", then "same but the watercolor one": the style names another
        elif chosen and self.last.checkpoint_id == chosen and follow.order and all(c.attribute == "subject" for c in follow.constraints):
            self._drop_earlier(follow, other_than=chosen)  # "the cartoon horse", then "the newest one then"
        if asked and self.last.action == "no_match" and _TURNING_DOWN.match(reply):
            kept = self.request, self.intent, self.last  # "nah, show me what i have in fresco": the question turned
            if self.ask(reply).action == "no_match":  # down, and a request of its own where the two together fit nothing
                self.request, self.intent, self.last = kept
        return self.last

    def _ask_anew(self, reply: str, full: Intent, named: bool) -> CheckInResult:
        """A new request; "what else is on the beach?" asks it without the checkpoint chosen last (unless
        the reply names a checkpoint itself, `named`)."""
        chosen = self.last.checkpoint_id if full.not_that_one and self.last.action == "select" else None
        self.ask(reply)
        if chosen is not None and not named:
            self.intent = replace(self.intent, constraints=[*self.intent.constraints,
                                                            Constraint("checkpoints", frozenset({chosen}), "that one", excluded=True)])
            self.last = self.checkin.decide(self.request, self.intent, self.now, self.pool)
        return self.last

    def _same_or_other(self, reply: str, follow: Intent) -> tuple[Intent, Intent]:
        """"same animal but the newest one", "same style but the cat": of the earlier request only the
        attribute named after "same" stays (the words naming it ask for nothing new), or, where the
        request did not name it, the chosen checkpoint's; "a different subject" rules the earlier
        subject out, and "anything in the forest", naming no subject, drops it, while "any bear from
        2025" asks afresh about the subject it names, the earlier looks and places gone. Returns the
        earlier request the follow-up refines, and the follow-up."""
        vocabulary = self.checkin.snapshot.vocabulary
        base = self.intent
        if _ANY_SUBJECT.search(reply) and not any(c.attribute in ("subject", "unknown") for c in follow.constraints):
            base = replace(base, constraints=[c for c in base.constraints if c.attribute not in ("subject", "unknown")])
        subject = follow.subject
        if subject is not None and _ANY_BEFORE.search(reply[:subject.start]):
            base = replace(base, constraints=[])
        for pattern, keep in ((_SAME_ATTRIBUTE, True), (_OTHER_ATTRIBUTE, False)):
            m = pattern.search(reply)  # "another horse" is one more of them: only a word for the attribute says "other"
            attribute = m and (_attribute_named(*m.groups(), vocabulary) if keep else _ATTRIBUTE_WORDS.get(m.group(1).lower()))
            if not attribute:
                continue
            group = {"subject", "unknown"} if attribute == "subject" else {attribute}
            earlier = [c for c in base.constraints if c.attribute in group and not c.excluded]
            if not earlier and self.last.action == "select":  # "the watercolor dog", then "same place but ...": the chosen one's place
                value = _attribute_value(self.checkin.snapshot.cards[self.last.checkpoint_id], "category" if attribute == "subject" else attribute)
                earlier = [Constraint(attribute, term_key(value), value)] if value else []
            follow.constraints = [c for c in follow.constraints if not m.start() <= c.start < m.end()
                                  or not keep and c.attribute == "subject"]  # "a different animal": still an animal
            if keep:
                base = Intent(base.text, earlier)
            else:
                follow.constraints += [replace(c, excluded=True) for c in earlier]
        return base, follow

    def _drop_earlier(self, follow: Intent, other_than: str | None = None, only: tuple[str, ...] | None = None) -> None:
        """A refinement that fits nothing with an earlier constraint ("bear number 3", then "no, the
        realistic one") drops that constraint: the latest earlier one whose removal lets something fit,
        else all its description words at once, which count together ("folded out of paper"), else its
        order word ("my most used horse", then "no, the realistic one", where the realistic horse never was).
        An order word that would choose the checkpoint already chosen asks for another one, so an earlier
        constraint is dropped the same way until it picks `other_than` no more. An answer to a question
        may drop only `only` attributes: a description word may be why the question missed the
        checkpoint the answer names, while "the watercolor one", then "the one on the beach", where no
        watercolor is on the beach, fits nothing."""
        new = set(map(id, follow.constraints))
        earlier = [c for c in self.intent.constraints if id(c) not in new and c.attribute not in ("subject", "unknown")
                   and (only is None or c.attribute in only)]
        cues = [c for c in earlier if c.attribute == "cue"]
        relaxations = [replace(self.intent, constraints=[x for x in self.intent.constraints if all(x is not c for c in dropped)])
                       for dropped in [*([c] for c in reversed(earlier)), *([cues] if len(cues) > 1 else [])]]
        if self.intent.order and not follow.order and only is None:  # "my most used horse", then "no, the realistic one"
            relaxations.append(replace(self.intent, order=None, order_words="", order_rank=0))
        for relaxed in relaxations:
            result = self.checkin.decide(self.request, relaxed, self.now, self.pool)
            if result.action != "no_match" and (other_than is None or result.checkpoint_id != other_than):
                self.intent, self.last = relaxed, result
                return

    def _offered_named(self, reply: str) -> list[ClarificationOption]:
        """The offered options a reply names by their words or WordNet's, else by what their cards describe."""
        snap = self.checkin.snapshot
        return _options_named(self.last.options, reply, snap.vocabulary) or _option_described(self.last.options, reply, snap, self.checkin.store)

    def _narrow(self, extra: Intent) -> CheckInResult:
        """An answer to the open question: decide again among the checkpoints it offered."""
        plausible = set(self.last.plausible_ids)
        self.intent = self.intent.merged(extra)
        self.last = self.checkin.decide(self.request, self.intent, self.now, plausible)
        return self.last

    def _is_new_request(self, full: Intent, text: str) -> bool:
        """Another subject than the one asked for, and no word tying it to the earlier request. Where
        the earlier request named no subject ("the one in the forest"), a subject that none of the offered
        checkpoints is asks anew when the catalog lacks it ("do you have a submarine?"), the reply says
        more ("give me the cat in the snow") or turns the question down ("nah, the cat"); named alone
        ("the cat"), it may be the one the question missed.
        A word the catalog lacks that names one offered option ("the hand one" for the handbag) answers it,
        as do words one offered option fits best ("the one by the plum trees"), unless they name another
        thing to draw ("the lighthouse in watercolor"). A reply that asks for any subject ("what about
        something in the forest") drops the one asked about."""
        snap = self.checkin.snapshot
        new = [c for c in full.constraints if c.attribute in ("subject", "unknown") and not c.excluded]
        old = [c for c in self.intent.constraints if c.attribute in ("subject", "unknown") and not c.excluded]
        if _SAME.search(text):  # "show me the lino ones instead": a look or place across subjects
            return not new and bool(old) and bool(_LOOK_ONES_INSTEAD.search(text)) and any(
                c.attribute in ("style", "environment") and not c.excluded for c in full.constraints)
        if not new:  # "what about something in the forest", "actually, the watercolor ones": any subject, not the one asked about
            return bool(full.order and ACROSS_ALL.search(text)) or bool(old) and bool(  # "whats my newest one overall"
                _ANY_SUBJECT.search(text) or _TURNING_DOWN.match(text) and PLURAL_ONES.search(text) and full.constraints)
        if _TURNING_DOWN.match(text) and (any(c.attribute not in ("subject", "unknown", "cue") for c in full.constraints)
                                          or any(norm(c.words.split()[-1]) != c.words.split()[-1].lower() for c in new)
                                          or any(_INDEFINITE.search(text[:c.start]) for c in new)):
            return True  # "actually, the cat on the beach", "no, show me the cats", "no, give me a cat": the question or choice turned down
        if all(c.attribute == "unknown" for c in new) and (
                len(_options_named(self.last.options, " ".join(c.words for c in new), snap.vocabulary)) == 1
                or len(_option_described(self.last.options, text, snap, self.checkin.store)) == 1
                or len(_options_fitting_most(self.last.options, full, snap)) == 1 and not any(
                    snap.vocabulary.names_thing(c.words.lower()) and heads_a_thing_phrase(text, c.start, c.end) for c in new)):
            return False  # "the wrist one" for the wristwatch, "by the plum trees": words the catalog lacks, yet one offered fits; "the walrus" is new
        if not old:
            if any(snap.matching(a) & set(self.last.plausible_ids) for a in new):
                return False  # one of the offered or chosen checkpoints
            absent = not any(snap.matching(a) for a in new) and not self._offered_named(text)
            return absent or bool(_TURNING_DOWN.match(text)) or any(c.attribute not in ("subject", "unknown") for c in full.constraints)
        return not any(snap.matching(a) & snap.matching(b) or a.value == b.value for a in new for b in old)

    def _about_last(self, follow: Intent) -> Intent:
        """"not that one", "the older one": constraints relative to the checkpoint chosen last; "the
        previous one" after a choice is the one before it, as "the one before that" is."""
        if self.last.action == "select" and follow.order_rank == 1 and follow.order_words.lower() == "previous" \
                and not _KEEP_THE_REST.search(follow.text):  # ("and the previous version of that one?" keeps its place)
            follow.order, follow.order_words, follow.order_rank, follow.comparative = None, "", 0, "older"
        if not (follow.not_that_one or follow.comparative):
            return follow
        if self.last.action != "select":  # among the offered ones: the older or newer of them
            return _comparative_as_order(follow)
        chosen = self.checkin.snapshot.cards[self.last.checkpoint_id]
        if follow.not_that_one:
            follow.constraints.append(Constraint("checkpoints", frozenset({chosen.id}), "that one", excluded=True))
        if follow.comparative == "older":
            follow.constraints.append(Constraint("created", TimeWindow("older", end=chosen.created_at), "older"))
            follow.order, follow.order_words = ("created", "max"), "older"
        elif follow.comparative == "newer":
            follow.constraints.append(Constraint("created", TimeWindow("newer", start=chosen.created_at + timedelta(seconds=1)), "newer"))
            follow.order, follow.order_words = ("created", "min"), "newer"
        if follow.any_comparative:  # "one that's newer": every newer one fits, so several may
            follow.order, follow.order_words = None, ""
        return follow
