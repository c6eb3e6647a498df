"""Check-in: intent-aligned checkpoint selection with clarification, no-match and trigger rewrite."""

from personalq.checkin.checkin import CheckIn, CheckInResult, ClarificationOption, Conversation
from personalq.checkin.rerank import LiteLLMReranker

__all__ = ["CheckIn", "CheckInResult", "ClarificationOption", "Conversation", "LiteLLMReranker"]
