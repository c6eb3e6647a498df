"""Chat tab handlers: a message or example asks Check-in, a card click answers or chooses, Render and
Compare draw, Cancel stops. Every handler finds its conversation by the Gradio session hash, so two
browser tabs (or two `gradio_client.Client`s) never share a question, a selection or their images.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import gradio as gr

from app import render
from personalq.service import AppError, ChatReply, Comparison, PersonalQService, Progress, Rendered

PRIVATE = dict(api_visibility="private")


def assistant(content) -> dict:
    return {"role": "assistant", "content": content}


def error_line(error: Exception) -> str:
    return f"**Sorry:** {render.literal(error)}"


def generation_options(taq, steps, guidance, seed, random_seed) -> dict:
    """The form's generation controls as service options; a ticked "new seed each time" sends no seed."""
    return dict(taq=taq, steps=steps, guidance=guidance, seed=None if random_seed else seed)


class ChatHandlers:
    def __init__(self, service: PersonalQService, view):
        self.service, self.v = service, view
        v = view
        self.outputs = [v.chatbot, v.options, v.nearest, v.nearest_ids, v.prompt, v.status, v.message, v.renders,
                        v.comparison, v.download, v.seed]

    def wire(self, demo: gr.Blocks) -> None:
        v, out = self.v, self.outputs
        # A message typed while an image renders is a new turn, not a click to ignore (Gradio's default "once").
        turn = dict(PRIVATE, trigger_mode="multiple")
        events = [
            gr.on([v.message.submit, v.send.click], self.on_message, [v.message, v.chatbot, *v.generation], out, **turn),
            v.examples.click(self.on_example, [v.examples, v.chatbot, *v.generation], out, **turn),
            v.options.select(self.on_option, [v.chatbot, *v.generation], out, **turn),
            v.nearest.select(self.on_nearest, [v.nearest_ids, v.chatbot, *v.generation], out, **turn),
            v.render.click(self.on_render, [v.chatbot, v.prompt, *v.generation], out, **PRIVATE),
            v.compare.click(self.on_compare, [v.chatbot, v.prompt, v.compare_with, *v.generation], out, **PRIVATE),
            v.setting.input(self.on_render, [v.chatbot, v.prompt, *v.generation], out, **PRIVATE),
        ]
        v.cancel.click(self.on_cancel, None, [v.status], cancels=events, **PRIVATE)
        demo.load(self.on_load, None, [v.examples], **PRIVATE)

    # ---- events ---------------------------------------------------------------------------------

    def on_load(self):
        return gr.Dataset(samples=[[text] for text in self.service.example_prompts()])

    def on_message(self, text, history, setting, taq, steps, guidance, seed, random_seed, request: gr.Request):
        generation = (setting, taq, steps, guidance, seed, random_seed)
        yield from self._turn(history, text, lambda sid: self.service.chat(sid, text), request.session_hash, generation)

    def on_example(self, sample, history, setting, taq, steps, guidance, seed, random_seed, request: gr.Request):
        generation = (setting, taq, steps, guidance, seed, random_seed)
        text = sample[0] if isinstance(sample, list | tuple) else str(sample)
        yield from self._turn(history, text, lambda sid: self.service.select(sid, text), request.session_hash, generation)

    def on_option(self, history, setting, taq, steps, guidance, seed, random_seed, evt: gr.SelectData, request: gr.Request):
        generation = (setting, taq, steps, guidance, seed, random_seed)
        label = evt.value.get("caption") if isinstance(evt.value, dict) else None
        answer = lambda sid: self.service.answer(sid, int(evt.index))  # noqa: E731
        yield from self._turn(history, label or f"option {evt.index + 1}", answer, request.session_hash, generation)

    def on_nearest(self, ids, history, setting, taq, steps, guidance, seed, random_seed, evt: gr.SelectData, request: gr.Request):
        generation = (setting, taq, steps, guidance, seed, random_seed)
        chosen = ids[evt.index] if 0 <= evt.index < len(ids) else None
        choose = lambda sid: self.service.choose(sid, chosen)  # noqa: E731
        yield from self._turn(history, f"use {chosen}", choose, request.session_hash, generation)

    def on_render(self, history, prompt, setting, taq, steps, guidance, seed, random_seed, request: gr.Request):
        """Render (or a new bit-width): the prompt again at that setting, kept beside the earlier images."""
        sid = request.session_hash
        if self.service.session(sid).selected is None:
            yield {self.v.status: "Ask for a checkpoint first; then Render or Compare."}
            return
        yield from self._draw(history, sid, self.service.session_generate_events(
            sid, prompt, setting=setting, **generation_options(taq, steps, guidance, seed, random_seed)))

    def on_compare(self, history, prompt, compare_with, setting, taq, steps, guidance, seed, random_seed, request: gr.Request):
        sid = request.session_hash
        options = generation_options(taq, steps, guidance, seed, random_seed)
        events = self.service.compare_events(sid, compare_with, prompt, **options)
        yield from self._draw(history, sid, events)

    def on_cancel(self, request: gr.Request):
        """Gradio stops the handlers (`cancels=`); this stops their serving requests, queued or sampling."""
        self.service.cancel(request.session_hash)
        return "Cancelled."

    # ---- shared steps ---------------------------------------------------------------------------

    def _turn(self, history, said: str, turn: Callable[[str], ChatReply], sid: str, generation) -> Iterator[dict]:
        """One Check-in turn shown in the chat; a selection is rendered at once at the chosen bit-width."""
        history = (history or []) + [{"role": "user", "content": said}]
        try:
            reply = turn(sid)
        except AppError as error:
            yield {self.v.chatbot: history + [assistant(error_line(error))], self.v.status: ""}
            return
        history = self._show(history, reply)
        yield self._reply_updates(history, reply)
        if reply.action == "select":
            setting, *options = generation
            yield from self._draw(history, sid, self.service.session_generate_events(
                sid, None, setting=setting, **generation_options(*options)))

    def _show(self, history, reply: ChatReply) -> list:
        history = history + [assistant(render.reply_markdown(reply))]
        if reply.card is not None:
            history.append(assistant(gr.Image(render.thumbnail(reply.card), height=128, show_label=False, buttons=[])))
        return history

    def _reply_updates(self, history, reply: ChatReply) -> dict:
        v, clarifying, offering = self.v, reply.action == "clarify", bool(reply.nearest)
        updates = {v.chatbot: history, v.message: "", v.status: "",
                   v.options: gr.Gallery(value=render.option_items(reply) if clarifying else None, visible=clarifying),
                   v.nearest: gr.Gallery(value=render.nearest_items(reply) if offering else None, visible=offering),
                   v.nearest_ids: [c.id for c in reply.nearest]}
        if reply.action == "select":
            updates[v.prompt] = reply.prompt
        return updates

    def _draw(self, history, sid: str, events: Iterator) -> Iterator[dict]:
        """Stream progress into the status line, then show the images the session keeps."""
        v = self.v
        try:
            for event in events:
                if isinstance(event, Progress):
                    yield {v.status: render.progress_text(event)}
                elif isinstance(event, Comparison):
                    items = render.comparison_items(event)
                    yield {v.comparison: gr.Gallery(value=items, columns=len(event.variants), visible=True), v.status: "",
                           **self._kept(sid, event.variants[-1])}
                elif isinstance(event, Rendered):
                    yield {v.status: f"Rendered: {render.literal(event.label)}", **self._kept(sid, event)}
        except AppError as error:
            yield {v.chatbot: history + [assistant(error_line(error))], v.status: ""}

    def _kept(self, sid: str, latest: Rendered) -> dict:
        v = self.v
        return {v.renders: render.render_items(self.service.session(sid).renders), v.seed: latest.result.seed,
                v.download: gr.DownloadButton(value=str(latest.path), interactive=True,
                                              label=f"Download {latest.path.name}")}
