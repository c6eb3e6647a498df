"""The PersonalQ web app: Gradio Blocks over `personalq.service.PersonalQService`, and nothing else."""

from app.ui import CSS, build_app

__all__ = ["CSS", "build_app"]
