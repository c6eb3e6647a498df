"""Settings tab handlers: the form shows the values saved now (read when the page loads and when the tab
opens), and Save sends only the fields the user changed, so another tab's save is never overwritten."""

from __future__ import annotations

import gradio as gr

from app.chat_tab import PRIVATE, error_line
from personalq.service import AppError, PersonalQService, SettingsError, llm_key_status


def _shown(value) -> object:
    """A saved value as its box shows it (blank for no budget), so unchanged boxes compare equal."""
    return "" if value is None else value


class SettingsHandlers:
    def __init__(self, service: PersonalQService, view, admin_token, upload):
        self.service, self.v, self.admin_token, self.upload = service, view, admin_token, upload

    def wire(self, demo: gr.Blocks, tab: gr.Tab) -> None:
        v = self.v
        boxes = list(v.fields.values())
        gr.on([demo.load, tab.select], self.load, None, [*boxes, v.shown, v.key_status], **PRIVATE)
        v.save.click(self.save, [self.admin_token, v.shown, *boxes], [v.status, v.key_status, self.upload.file, v.shown],
                     **PRIVATE)

    def load(self):
        values = {name: _shown(value) for name, value in self.service.settings_values().items()}
        return *values.values(), values, llm_key_status(values["llm_model"])

    def save(self, token, shown, *boxes):
        typed = dict(zip(self.v.fields, boxes, strict=True))
        changes = {name: value for name, value in typed.items() if str(value if value is not None else "") != str(shown.get(name, ""))}
        if not changes:
            return "Nothing changed.", gr.skip(), gr.skip(), gr.skip()
        try:
            saved = self.service.save_settings(token=token, **changes)
        except (SettingsError, AppError) as error:
            return error_line(error), gr.skip(), gr.skip(), gr.skip()
        note = f"**Saved** {', '.join(changes)}. A new base model or budget applies to the next image; a larger upload limit after a restart."
        limit = gr.File(label=f"Checkpoint (.safetensors, at most {saved.upload_limit_mb} MiB)")
        values = {name: _shown(getattr(saved, name)) for name in self.v.fields}
        return note, llm_key_status(saved.llm_model), limit, values
