"""Test-wide guards: nothing reaches the network, and every test gets its own data directory."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import pytest  # noqa: E402


@pytest.fixture
def personalq_home(tmp_path, monkeypatch):
    """A fresh, empty PERSONALQ_HOME for one test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PERSONALQ_HOME", str(home))
    return home
