"""The PersonalQ web app: Gradio Blocks over `personalq.service.PersonalQService`, and nothing else."""

from app.ui import build_app

__all__ = ["build_app"]
