"""Trigger rewrite: the user's own prompt with the chosen checkpoint's canonical trigger in it."""

from __future__ import annotations

import re

_GENERIC_HEAD = re.compile(r"\b(model|checkpoint|lora|one)\b", re.I)
_LEADING_DETERMINER = re.compile(r"^\s*((?:a|an|the|my|our|your|use\s+my|use)\s+)", re.I)


def rewrite_prompt(text: str, trigger: str, subject_words: list[str]) -> str:
    """Replace every occurrence of the user's subject words with `trigger`, changing nothing else.

    Articles and the rest of the sentence stay as typed ("a bear" -> "a <bear-v4>"); the trigger is
    inserted whole, however many words or tokens it has. With no subject noun the trigger takes the
    place of a generic head ("yesterday's model" -> "yesterday's <dog-v3>"), else it goes first.
    """
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
