"""Trigger rewrite: the user's own prompt with the chosen checkpoint's canonical trigger in it."""

from __future__ import annotations

import re

_GENERIC_HEAD = re.compile(r"\b(model|checkpoint|lora|one)\b", re.I)
_LEADING_DETERMINER = re.compile(r"^\s*((?:a|an|the|my|our|your|use\s+my|use)\s+)", re.I)


def rewrite_prompt(text: str, trigger: str, subject_words: list[str]) -> str:
    """Replace every occurrence of the user's subject words with `trigger`, changing nothing else but
    a possessive before it.

    Articles and the rest of the sentence stay as typed ("a bear" -> "a <bear-v4>"); the trigger is
    inserted whole, however many words or tokens it has. With no subject noun the trigger takes the
    place of a generic head ("yesterday's model" -> "yesterday's <dog-v3>"), else it goes first.
    """
    return without_possessive(_with_trigger(text, trigger, subject_words), trigger)


def rewrite_named(text: str, names: list[str], trigger: str) -> str:
    """A request that names the checkpoint itself ("my bear-v3 at dawn"): each name becomes the trigger."""
    pattern = re.compile("|".join(rf"(?<![\w<-]){re.escape(n)}(?![\w>-])" for n in sorted(names, key=len, reverse=True)), re.I)
    return without_possessive(pattern.sub(lambda _: trigger, text), trigger)


def without_possessive(prompt: str, trigger: str) -> str:
    """"my <bear-v2> in the park" -> "<bear-v2> in the park", "my watercolor <dog-v1>" -> "watercolor <dog-v1>":
    the model does not know whose bear it is; a "my" or "our" up to three words before the trigger goes."""
    pattern = rf"\b(?:my|our)\s+((?:[\w'-]+\s+){{0,3}}){re.escape(trigger)}"
    return re.sub(pattern, lambda m: m.group(1) + trigger, prompt, flags=re.I).strip()


def _with_trigger(text: str, trigger: str, subject_words: list[str]) -> str:
    words = sorted({w for w in subject_words if w.strip()}, key=len, reverse=True)
    if words:
        pattern = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")(?:e?s)?\b", re.I)
        rewritten, count = pattern.subn(lambda _: trigger, text)
        if count:
            return rewritten
    m = _GENERIC_HEAD.search(text)
    if m:
        return text[:m.start()] + trigger + text[m.end():]
    m = _LEADING_DETERMINER.match(text)
    if m:
        return text[:m.end()] + trigger + " " + text[m.end():]
    return f"{trigger} {text}".strip()
