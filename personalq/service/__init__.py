"""The facade the web app and API clients call: sessions, Check-in turns, generation, uploads, settings.

    service = PersonalQService()            # opens $PERSONALQ_HOME, imports the demo repo when empty
    reply = service.chat(session_id, "my cartoon bear at the beach")
    for event in service.session_generate_events(session_id, setting="W8A8"): ...
    for event in service.compare_events(session_id, ["W8A8", "W4A8"], seed=3): ...
"""

from personalq.service.app_service import FORM_FIELDS, PersonalQService
from personalq.service.rendering import AppError, Comparison, Difference, Progress, Rendered, describe, resolve_seed
from personalq.service.chat import ChatReply, ChatSession, OptionCard
from personalq.service.settings import AppSettings, SettingsError, llm_key_status

__all__ = [
    "FORM_FIELDS", "AppError", "AppSettings", "ChatReply", "ChatSession", "Comparison", "Difference", "OptionCard",
    "PersonalQService", "Progress", "Rendered", "SettingsError", "describe", "llm_key_status", "resolve_seed",
]
