"""Check-in: intent-aligned checkpoint selection with clarification, no-match and trigger rewrite."""

from personalq.lazy import lazy_exports

_EXPORTS = {
    "CheckIn": "personalq.checkin.checkin",
    "CheckInResult": "personalq.checkin.checkin",
    "ClarificationOption": "personalq.checkin.checkin",
    "Conversation": "personalq.checkin.checkin",
    "LiteLLMReranker": "personalq.checkin.rerank",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
