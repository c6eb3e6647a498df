"""Test-wide guards: nothing reaches the network, and every test gets its own data directory."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# Repositories start empty in tests; the first-start import of a demo folder is tested by naming one.
os.environ["PERSONALQ_DEMO_REPO"] = "off"

import pytest  # noqa: E402


@pytest.fixture
def personalq_home(tmp_path, monkeypatch):
    """A fresh, empty PERSONALQ_HOME for one test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PERSONALQ_HOME", str(home))
    return home


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a module's torch work on one thread.

    Tiny models are overhead-bound, and on a busy 2-core machine torch's spinning worker threads slow
    each call many times over.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
