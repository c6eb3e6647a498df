"""Start the PersonalQ web app: `python app.py` (also the Hugging Face Spaces entry point).

Offline by default: the data directory is $PERSONALQ_HOME (else repo_store/); an empty one is filled
from the bundled demo repository, and images come from the shipped PQ-Nano model. Configure with
environment variables: PERSONALQ_HOST (else GRADIO_SERVER_NAME, else 0.0.0.0, what Spaces
expects), PORT or PERSONALQ_PORT (else GRADIO_SERVER_PORT, else 7860), PERSONALQ_HOME,
PERSONALQ_BASE_MODEL, PERSONALQ_CHECKIN_LLM, PERSONALQ_MEMORY_BUDGET_MB, PERSONALQ_UPLOAD_LIMIT_MB,
PERSONALQ_STEPS; an LLM backend's keys under the names LiteLLM reads. For a public deploy:
PERSONALQ_ADMIN_TOKEN (uploads, removals and settings then need this token) and PERSONALQ_UPLOADS=off.
"""

from __future__ import annotations

import os

import personalq  # noqa: F401  (turns telemetry off before Gradio is imported)


def _env(*names: str) -> str | None:
    """The first of these variables that is set: ours, then the names Spaces and Gradio use."""
    return next((os.environ[name] for name in names if os.environ.get(name, "").strip()), None)


def main() -> None:
    from app import CSS, build_app
    from personalq.service import PersonalQService

    service = PersonalQService()
    demo = build_app(service)
    demo.queue(default_concurrency_limit=8)  # Check-in answers while an image renders; serving queues the images
    demo.launch(
        server_name=_env("PERSONALQ_HOST", "GRADIO_SERVER_NAME") or "0.0.0.0",
        server_port=int(_env("PORT", "PERSONALQ_PORT", "GRADIO_SERVER_PORT") or 7860),
        max_file_size=f"{service.settings.upload_limit_mb}mb",
        # No allowed_paths: Gradio serves only its own cache (re-encoded images, the visitor's own uploads).
        # The data directory is blocked as well, so no later change can expose the catalog or a checkpoint.
        blocked_paths=[str(service.home.resolve())],
        css=CSS,
    )


if __name__ == "__main__":
    main()
