"""The app's user settings, kept as JSON in the data directory.

Spaces and containers configure the app through environment variables; a user who changes a value in
the Settings tab expects it to survive a restart. So the environment gives the defaults and the saved
file, once written, wins. API keys are never part of the settings: LiteLLM reads them from the
environment, and the app only says whether the ones a model needs are present.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from personalq.atomic_write import atomic_write

SETTINGS_FILE = "settings.json"

_ENV = {
    "base_model": "PERSONALQ_BASE_MODEL",
    "llm_model": "PERSONALQ_CHECKIN_LLM",  # the variable Check-in itself reads
    "memory_budget_mb": "PERSONALQ_MEMORY_BUDGET_MB",
    "upload_limit_mb": "PERSONALQ_UPLOAD_LIMIT_MB",
    "steps": "PERSONALQ_STEPS",
}
_WHOLE_NUMBERS = ("memory_budget_mb", "upload_limit_mb", "steps")
_REQUIRED_NUMBERS = ("upload_limit_mb", "steps")  # blank keeps the default: uploads are never unbounded


class SettingsError(ValueError):
    """A settings value that cannot be used; the message is one line for the UI."""


def whole_number(value, name: str, error: type[ValueError] = SettingsError) -> int | None:
    """A whole number from loosely typed input (a form field, an env string, a float from the UI); blank is None."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise error(f"{name} must be a number, got {value!r}") from None
    if number != int(number):
        raise error(f"{name} must be a whole number, got {value!r}")
    return int(number)


@dataclass(frozen=True)
class AppSettings:
    """What a user may change without editing code.

    base_model: "pq-nano" (shipped), a hub id, a local diffusers folder or a single-file checkpoint.
    llm_model: a LiteLLM model name for Check-in's reranker; empty keeps the offline deterministic backend.
    memory_budget_mb: byte budget of the serving cache, in MiB; None lets the serving layer decide.
    upload_limit_mb: the largest checkpoint the Upload tab accepts.
    steps: the sampling steps the chat starts with (a few for PQ-Nano on CPU, more for SD).
    """

    base_model: str = "pq-nano"
    llm_model: str = ""
    memory_budget_mb: int | None = None
    upload_limit_mb: int = 512
    steps: int = 20

    def __post_init__(self):
        if not str(self.base_model).strip():
            raise SettingsError("base model must not be empty (use pq-nano for the shipped model)")
        for name in _WHOLE_NUMBERS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise SettingsError(f"{name} must be a positive whole number, got {value!r}")

    @property
    def memory_budget_bytes(self) -> int | None:
        return None if self.memory_budget_mb is None else self.memory_budget_mb * 2**20

    @classmethod
    def from_values(cls, **values) -> AppSettings:
        """Build from loosely typed input (form fields, env strings), with a one-line reason on bad values."""
        clean = {}
        for name, value in values.items():
            if name not in _ENV:
                raise SettingsError(f"unknown setting {name!r}")
            if name in _WHOLE_NUMBERS:
                value = whole_number(value, name)
                if value is None and name in _REQUIRED_NUMBERS:
                    continue
            else:
                value = "" if value is None else str(value).strip()
            clean[name] = value
        return cls(**clean)

    @classmethod
    def load(cls, home: Path) -> AppSettings:
        """Defaults, overridden by the environment, overridden by the saved file."""
        values = {name: os.environ[var] for name, var in _ENV.items() if os.environ.get(var, "").strip()}
        path = Path(home) / SETTINGS_FILE
        if path.exists():
            try:
                saved = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as error:
                raise SettingsError(f"cannot read {path}: {error}") from None
            values.update({k: v for k, v in saved.items() if k in _ENV})
        return cls.from_values(**values)

    def save(self, home: Path) -> Path:
        """Write atomically so a crash never leaves a half-written settings file."""
        return atomic_write(Path(home) / SETTINGS_FILE, json.dumps(asdict(self), indent=2).encode())


def llm_key_status(model: str) -> str:
    """Whether the environment holds the keys the LiteLLM model needs, naming missing variables, never values."""
    if not model:
        return "Check-in runs offline (deterministic backend); no key needed."
    import litellm

    try:
        report = litellm.validate_environment(model=model)
    except Exception as error:  # LiteLLM raises on names it cannot map to a provider
        return f"LiteLLM cannot check {model!r}: {error}".splitlines()[0]
    missing = report.get("missing_keys") or []
    if missing:
        return f"Missing in the environment: {', '.join(missing)} (Check-in falls back to the offline backend)."
    return "The keys this model needs are set in the environment."


