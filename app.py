"""Start the PersonalQ web app: `python app.py` (also the Hugging Face Spaces entry point).

Offline by default: the data directory is $PERSONALQ_HOME (else repo_store/); an empty one is filled
from the bundled demo repository, and images come from the shipped PQ-Nano model. Configure with
environment variables: PERSONALQ_HOST (default 0.0.0.0, what Spaces expects), PORT or
PERSONALQ_PORT (default 7860), PERSONALQ_BASE_MODEL, PERSONALQ_CHECKIN_LLM, PERSONALQ_MEMORY_BUDGET_MB,
PERSONALQ_UPLOAD_LIMIT_MB, PERSONALQ_STEPS; keys for an LLM backend as LiteLLM names them.
"""

from __future__ import annotations

import os

import personalq  # noqa: F401  (turns telemetry off before Gradio is imported)


def launch(prevent_thread_lock: bool = False):
    from app import CSS, build_app
    from personalq.service import PersonalQService

    service = PersonalQService()
    demo = build_app(service)
    demo.queue(default_concurrency_limit=8)  # Check-in answers while an image renders; serving queues the images
    demo.launch(
        server_name=os.environ.get("PERSONALQ_HOST", "0.0.0.0"),
        server_port=int(os.environ.get("PORT") or os.environ.get("PERSONALQ_PORT") or 7860),
        max_file_size=f"{service.settings.upload_limit_mb}mb",
        allowed_paths=[str(service.home)],
        prevent_thread_lock=prevent_thread_lock,
        css=CSS,
    )
    return demo, service


if __name__ == "__main__":
    launch()
