"""Repository tab handlers: list and filter, a checkpoint's detail, "use in chat", removal after a question."""

from __future__ import annotations

import gradio as gr

from app import render
from app.chat_tab import PRIVATE, error_line
from personalq.service import AppError, PersonalQService


class RepositoryHandlers:
    def __init__(self, service: PersonalQService, view, admin_token, chat, tabs):
        self.service, self.v, self.admin_token, self.chat, self.tabs = service, view, admin_token, chat, tabs

    def wire(self, tab: gr.Tab) -> None:
        v = self.v
        listing = [v.gallery, v.shown_ids, v.status, v.category, v.style]
        filters_changed = [v.show.click, v.search.submit, v.created_from.submit, v.created_to.submit,
                           v.category.input, v.style.input, tab.select]
        gr.on(filters_changed, self.show, v.filters, listing, **PRIVATE)
        # One queue for the detail pane's events, run in the order they were asked: each listener
        # otherwise has its own, and a slow card selection finishing after "Remove…" hid its question.
        detail = dict(PRIVATE, concurrency_id="repository-detail")
        v.gallery.select(self.detail, [v.shown_ids], [v.chosen_id, v.detail_row, v.detail, v.previews, v.timeline,
                                                      v.timeline_text, v.confirm_row, v.trigger], **detail)
        v.remove.click(self.ask_removal, [v.chosen_id], [v.confirm_row, v.confirm_text], **detail)
        v.keep.click(lambda: gr.Row(visible=False), None, [v.confirm_row], **detail)
        v.confirm.click(self.remove, [v.chosen_id, self.admin_token, *v.filters],
                        [v.confirm_row, v.detail_row, v.chosen_id, *listing], **detail)
        c = self.chat
        v.use.click(self.use_in_chat, [v.chosen_id, c.chatbot], [self.tabs, c.chatbot, c.prompt, c.status], **PRIVATE)

    def show(self, category, style, created_from, created_to, search):
        cats, stys = self.service.facets()
        choices = (gr.Dropdown(choices=["", *cats]), gr.Dropdown(choices=["", *stys]))
        try:
            cards = self.service.repository(category, style, created_from, created_to, search)
        except AppError as error:
            return gr.skip(), gr.skip(), error_line(error), *choices
        broken = self.service.broken()
        items = [(render.thumbnail(c), render.caption(c, broken.get(c.id))) for c in cards]
        return items, [c.id for c in cards], f"{len(cards)} checkpoint(s)", *choices

    def detail(self, ids, evt: gr.SelectData):
        try:
            card, versions = self.service.detail(ids[evt.index])
        except (AppError, IndexError) as error:
            return None, gr.Row(visible=False), error_line(error), None, None, "", gr.Row(visible=False), ""
        broken = self.service.broken().get(card.id)
        return (card.id, gr.Row(visible=True), render.detail_markdown(card, broken), render.preview_images(card),
                [(render.thumbnail(x), render.caption(x)) for x in versions], render.timeline_markdown(card, versions),
                gr.Row(visible=False), card.trigger)

    def ask_removal(self, checkpoint_id):
        return gr.Row(visible=True), f"Remove **{render.literal(checkpoint_id)}** and its files? This cannot be undone."

    def remove(self, checkpoint_id, token, *filter_values):
        try:
            self.service.remove(checkpoint_id, token=token)
            note = f"Removed {render.literal(checkpoint_id)}."
        except AppError as error:
            note = error_line(error)
        items, ids, count, *choices = self.show(*filter_values)
        return gr.Row(visible=False), gr.Row(visible=False), None, items, ids, f"{note} {count}", *choices

    def use_in_chat(self, checkpoint_id, history, request: gr.Request):
        """Select this checkpoint in the visitor's chat session and go there, ready to Render or Compare."""
        try:
            reply = self.service.choose(request.session_hash, checkpoint_id)
        except AppError as error:
            return gr.skip(), gr.skip(), gr.skip(), error_line(error)
        history = (history or []) + [{"role": "assistant", "content": render.reply_markdown(reply)}]
        return gr.Tabs(selected="chat"), history, reply.prompt, "Selected; press **Compare bit-widths** or **Render**."
