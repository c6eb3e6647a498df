"""Upload tab handlers: the form prefilled from the file's header, previews shown before saving, and each
refusal as one line next to the field at fault."""

from __future__ import annotations

import io

import gradio as gr
from PIL import Image

from app import render
from app.chat_tab import PRIVATE
from personalq.service import FORM_FIELDS, AppError, PersonalQService


class UploadHandlers:
    def __init__(self, service: PersonalQService, view, admin_token):
        self.service, self.v, self.admin_token = service, view, admin_token
        self.refusal_boxes = [view.file_refusal, *(view.refusals[name] for name in FORM_FIELDS)]

    def wire(self) -> None:
        v = self.v
        v.file.upload(self.prefill, [v.file], [*v.boxes, v.status, *self.refusal_boxes], **PRIVATE).then(
            self.show_thumbnail, [v.file, v.previews], [v.shown_previews], **PRIVATE)
        v.previews.change(self.show_previews, [v.previews], [v.shown_previews], **PRIVATE)
        v.save.click(self.save, [v.file, v.previews, self.admin_token, *v.boxes],
                     [v.status, v.file, v.previews, *v.boxes, *self.refusal_boxes], **PRIVATE)

    def _refusals(self, error: Exception | None = None) -> list[str]:
        """One line beside the field the refusal names (the file's own box when it names none)."""
        lines = [""] * len(self.refusal_boxes)
        if error is not None:
            field = self.service.refusal_field(error)
            lines[0 if field is None else 1 + FORM_FIELDS.index(field)] = render.literal(error)
        return lines

    def prefill(self, path):
        if not path:
            return *[""] * len(FORM_FIELDS), "", *self._refusals()
        try:
            values = self.service.upload_form(path)
        except AppError as error:  # clear the form: values from an earlier file would be misleading
            return *[""] * len(FORM_FIELDS), f"**Refused:** {render.literal(error)}", *self._refusals(error)
        return *[values[name] for name in FORM_FIELDS], "Read the file's metadata; check the form and save.", *self._refusals()

    def show_thumbnail(self, path, previews):
        """The header's own thumbnail, when the user has chosen no preview images (it then becomes the preview)."""
        if previews or not path:
            return gr.skip()
        try:
            data = self.service.header_thumbnail(path)
        except AppError:
            return gr.Gallery(value=None, visible=False)  # the refusal is already beside the file box
        if data is None:
            return gr.Gallery(value=None, visible=False)
        return gr.Gallery(value=[(Image.open(io.BytesIO(data)), "from the file's header")], visible=True)

    def show_previews(self, paths):
        images = [render.preview_image(p) for p in paths or []]
        return gr.Gallery(value=images or None, visible=bool(images))

    def save(self, path, previews, token, *values):
        keep = [gr.skip()] * (2 + len(FORM_FIELDS))
        if not path:
            error = AppError("choose a .safetensors file first")
            return f"**Refused:** {render.literal(error)}", *keep, *self._refusals(error)
        try:
            card = self.service.upload(path, dict(zip(FORM_FIELDS, values, strict=True)), previews or [], token=token)
        except AppError as error:
            return f"**Refused:** {render.literal(error)}", *keep, *self._refusals(error)
        cleared = [None, None, *[""] * len(FORM_FIELDS)]  # ready for the next checkpoint
        return (f"**Added {render.literal(card.id)}** (`{render.literal(card.trigger)}`); ask for it in the chat.",
                *cleared, *self._refusals())
