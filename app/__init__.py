"""The PersonalQ web app: Gradio Blocks over `personalq.service.PersonalQService`, and nothing else.

`layout` places the components; `chat_tab`, `repository_tab`, `upload_tab` and `settings_tab` hold each
tab's handlers (each a few lines calling the service); `api` the named endpoints for `gradio_client`.
"""

from app.layout import CSS, build_app

__all__ = ["CSS", "build_app"]
