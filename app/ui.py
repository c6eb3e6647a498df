"""The Gradio Blocks: four tabs and four named API endpoints, each handler one call into the service.

Every handler finds its conversation by the Gradio session hash, so two browser tabs (or two
`gradio_client.Client`s) never share a clarification or a "last prompt".
"""

from __future__ import annotations

import gradio as gr

from app import render
from personalq.service import FORM_FIELDS, AppError, PersonalQService, Progress, SettingsError, llm_key_status

FORM_LABELS = {
    "id": "Name (id)",
    "triggers": "Triggers (first is canonical)",
    "subject_types": "Subject types",
    "style_tags": "Style tags",
    "description": "Description",
    "created_at": "Created (ISO date)",
    "version": "Version",
    "environment": "Environment",
    "category": "Category",
    "base_model": "Base model",
    "kind": "Kind (lora, dreambooth, textual_inversion)",
}
NO_CHANGE = gr.skip
CSS = "#chat .image-frame img { min-width: 160px; min-height: 160px; object-fit: contain; image-rendering: pixelated; }"
"""PQ-Nano draws 64x64 images: show them large and crisp rather than as a blurry thumbnail."""


def _assistant(content) -> dict:
    return {"role": "assistant", "content": content}


def _error(error: Exception) -> str:
    return f"**Sorry:** {render.literal(error)}"


def build_app(service: PersonalQService) -> gr.Blocks:
    categories, styles = service.facets()
    limit_mb = service.settings.upload_limit_mb

    # Generated images pile up in Gradio's cache; drop those older than a day, checking hourly.
    with gr.Blocks(title="PersonalQ", delete_cache=(3600, 86400)) as demo:
        gr.Markdown("## PersonalQ — your personalized checkpoints, picked by chat and served quantized")
        # Server-wide changes (upload, removal, settings) need this when PERSONALQ_ADMIN_TOKEN is set.
        admin_token = gr.Textbox(label="Admin token (needed to upload, remove or change settings)", type="password",
                                 visible=service.access.locked, elem_id="admin-token")
        with gr.Tabs():
            # ------------------------------------------------------------------ chat
            with gr.Tab("Chat", id="chat"):
                with gr.Row():
                    with gr.Column(scale=3):
                        chatbot = gr.Chatbot(label="Check-in", height=560, elem_id="chat", buttons=["copy"],
                                             feedback_options=None, placeholder=render.CHAT_PLACEHOLDER)
                        options = gr.Gallery(label="Choose one", visible=False, columns=4, height=190, fit_columns=False,
                                             allow_preview=False, elem_id="options", object_fit="cover")
                        with gr.Row():
                            message = gr.Textbox(show_label=False, scale=5, elem_id="message", submit_btn=False,
                                                 placeholder="e.g. my cartoon bear at the beach, the April one")
                            send = gr.Button("Send", variant="primary", scale=1, elem_id="send")
                        with gr.Row():
                            prompt = gr.Textbox(label="Prompt for the model (editable)", scale=5, elem_id="prompt")
                            render_button = gr.Button("Render", scale=1, elem_id="render")
                        status = gr.Markdown(elem_id="status")
                    with gr.Column(scale=1, min_width=240):
                        gr.Markdown("**Generation**")
                        widths = service.bit_widths()
                        setting = gr.Radio(widths, value=widths[0], label="Bit-width", elem_id="bitwidth",
                                           info="Changing it re-renders the last prompt")
                        taq = gr.Checkbox(True, label="TAQ: protect the trigger tokens", elem_id="taq")
                        steps = gr.Slider(1, 100, value=service.settings.steps, step=1, label="Steps", elem_id="steps")
                        guidance = gr.Textbox("", label="Guidance (blank: the model's default)", elem_id="guidance")
                        seed = gr.Number(0, precision=0, label="Seed", elem_id="seed")
                generation = [setting, taq, steps, guidance, seed]
                chat_outputs = [chatbot, options, prompt, status, message]

            # ------------------------------------------------------------------ repository
            with gr.Tab("Repository", id="repository") as repository_tab:
                with gr.Row():
                    category = gr.Dropdown(["", *categories], value="", label="Category", allow_custom_value=True)
                    style = gr.Dropdown(["", *styles], value="", label="Style", allow_custom_value=True)
                    created_from = gr.Textbox(label="Created from", placeholder="2025-04-01 or April 2025")
                    created_to = gr.Textbox(label="Created to", placeholder="2025-06-30 or last month")
                    search = gr.Textbox(label="Search", placeholder="words, trigger or id", elem_id="repo-search")
                filter_button = gr.Button("Show", elem_id="repo-filter")
                repo_status = gr.Markdown(elem_id="repo-status")
                gallery = gr.Gallery(label="Checkpoints", columns=8, height=320, allow_preview=False, fit_columns=False,
                                     elem_id="repo-gallery", object_fit="cover")
                shown_ids = gr.State([])
                chosen_id = gr.State(None)
                with gr.Row(visible=False) as detail_row:
                    with gr.Column(scale=2):
                        detail = gr.Markdown(elem_id="repo-detail")
                    with gr.Column(scale=2):
                        detail_previews = gr.Gallery(label="Previews", columns=4, height=180, fit_columns=False,
                                                     elem_id="repo-detail-previews")
                        timeline = gr.Gallery(label="Versions of this concept, oldest first", columns=6, height=170,
                                              allow_preview=False, fit_columns=False)
                        timeline_text = gr.Markdown(elem_id="repo-timeline")
                        remove_button = gr.Button("Remove…", variant="stop", elem_id="repo-remove")
                        with gr.Row(visible=False) as confirm_row:
                            confirm_text = gr.Markdown()
                            confirm_button = gr.Button("Yes, remove it", variant="stop", elem_id="repo-confirm")
                            cancel_button = gr.Button("Keep it", elem_id="repo-cancel")
                filters = [category, style, created_from, created_to, search]
                listing = [gallery, shown_ids, repo_status, category, style]

            # ------------------------------------------------------------------ upload
            with gr.Tab("Upload", id="upload", visible=service.access.uploads_enabled):
                checkpoint_file = gr.File(label=f"Checkpoint (.safetensors, at most {limit_mb} MiB)",
                                          file_types=[".safetensors"], type="filepath", elem_id="upload-file")
                preview_files = gr.File(label="Preview images", file_count="multiple", file_types=["image"],
                                        type="filepath", elem_id="upload-previews")
                gr.Markdown("The form is filled from the file's header and sidecar; edit anything before saving. "
                            "Lists are comma-separated.")
                form = {}
                with gr.Row():
                    with gr.Column():
                        for name in FORM_FIELDS[:6]:
                            form[name] = gr.Textbox(label=FORM_LABELS[name], elem_id=f"form-{name}",
                                                    lines=3 if name == "description" else 1)
                    with gr.Column():
                        for name in FORM_FIELDS[6:]:
                            form[name] = gr.Textbox(label=FORM_LABELS[name], elem_id=f"form-{name}")
                save_upload = gr.Button("Validate and add to the repository", variant="primary", elem_id="upload-save")
                upload_status = gr.Markdown(elem_id="upload-status")
                form_boxes = [form[name] for name in FORM_FIELDS]

            # ------------------------------------------------------------------ settings
            with gr.Tab("Settings", id="settings"):
                current = service.settings
                base_model = gr.Textbox(current.base_model, label="Base model",
                                        info="pq-nano (shipped), a hub id, a diffusers folder or a single-file checkpoint")
                llm_model = gr.Textbox(current.llm_model, label="Check-in LLM (LiteLLM model name)",
                                       info="Empty: the offline deterministic Check-in. Keys come from the environment.")
                key_status = gr.Markdown(llm_key_status(current.llm_model))
                budget = gr.Textbox("" if current.memory_budget_mb is None else str(current.memory_budget_mb),
                                    label="Memory budget (MiB, blank: no limit)", elem_id="settings-budget")
                upload_limit = gr.Number(current.upload_limit_mb, label="Upload size limit (MiB)", precision=0)
                default_steps = gr.Number(current.steps, label="Default sampling steps", precision=0)
                save_settings = gr.Button("Save settings", variant="primary", elem_id="settings-save")
                settings_status = gr.Markdown(elem_id="settings-status")

        # ---------------------------------------------------------------------- chat handlers
        def show_reply(history, reply):
            history = history + [_assistant(render.reply_markdown(reply))]
            if reply.card is not None:
                history.append(_assistant(gr.Image(render.thumbnail(reply.card), height=128, show_label=False,
                                                   buttons=[])))
            clarifying = reply.action == "clarify"
            option_update = gr.Gallery(value=render.option_items(reply) if clarifying else None, visible=clarifying)
            prompt_update = reply.prompt if reply.action == "select" else NO_CHANGE()
            return history, option_update, prompt_update

        def draw(history, session_id, prompt_text, setting_, taq_, steps_, guidance_, seed_):
            """Stream progress into the status line, then put the labelled image into the chat."""
            try:
                for event in service.session_generate_events(session_id, prompt_text, setting=setting_, taq=taq_,
                                                             steps=steps_, guidance=guidance_, seed=seed_):
                    if isinstance(event, Progress):
                        yield history, NO_CHANGE(), NO_CHANGE(), render.progress_text(event), NO_CHANGE()
                    else:
                        history = history + [
                            _assistant(gr.Image(event.image, label=event.label, show_label=True, height=256)),
                            _assistant(f"Rendered: {event.label}"),
                        ]
                        yield history, NO_CHANGE(), NO_CHANGE(), "", NO_CHANGE()
            except AppError as error:
                yield history + [_assistant(_error(error))], NO_CHANGE(), NO_CHANGE(), "", NO_CHANGE()

        def converse(history, turn, session_id, generation_values):
            try:
                reply = turn(session_id)
            except AppError as error:
                yield history + [_assistant(_error(error))], NO_CHANGE(), NO_CHANGE(), "", NO_CHANGE()
                return
            history, option_update, prompt_update = show_reply(history, reply)
            yield history, option_update, prompt_update, "", ""
            if reply.action == "select":
                yield from draw(history, session_id, reply.prompt, *generation_values)

        def on_message(text, history, setting_, taq_, steps_, guidance_, seed_, request: gr.Request):
            history = (history or []) + [{"role": "user", "content": text}]
            yield from converse(history, lambda sid: service.chat(sid, text), request.session_hash,
                                (setting_, taq_, steps_, guidance_, seed_))

        def on_option(history, setting_, taq_, steps_, guidance_, seed_, evt: gr.SelectData, request: gr.Request):
            label = evt.value.get("caption") if isinstance(evt.value, dict) else None
            history = (history or []) + [{"role": "user", "content": label or f"option {evt.index + 1}"}]
            yield from converse(history, lambda sid: service.answer(sid, int(evt.index)), request.session_hash,
                                (setting_, taq_, steps_, guidance_, seed_))

        def on_render(history, prompt_text, setting_, taq_, steps_, guidance_, seed_, request: gr.Request):
            yield from draw(history or [], request.session_hash, prompt_text, setting_, taq_, steps_, guidance_, seed_)

        def on_setting(history, setting_, taq_, steps_, guidance_, seed_, request: gr.Request):
            """A new bit-width re-renders the session's last prompt, so the two images can be compared."""
            if service.session(request.session_hash).selected is None:
                yield history, NO_CHANGE(), NO_CHANGE(), "", NO_CHANGE()
                return
            yield from draw(history or [], request.session_hash, None, setting_, taq_, steps_, guidance_, seed_)

        private = dict(api_visibility="private")
        gr.on([message.submit, send.click], on_message, [message, chatbot, *generation], chat_outputs, **private)
        options.select(on_option, [chatbot, *generation], chat_outputs, **private)
        render_button.click(on_render, [chatbot, prompt, *generation], chat_outputs, **private)
        setting.input(on_setting, [chatbot, *generation], chat_outputs, **private)

        # ---------------------------------------------------------------------- repository handlers
        def show_repository(category_, style_, created_from_, created_to_, search_):
            cats, stys = service.facets()
            choices = (gr.Dropdown(choices=["", *cats]), gr.Dropdown(choices=["", *stys]))
            try:
                cards = service.repository(category_, style_, created_from_, created_to_, search_)
            except AppError as error:
                return NO_CHANGE(), NO_CHANGE(), _error(error), *choices
            broken = service.broken()
            items = [(render.thumbnail(c), render.caption(c, broken.get(c.id))) for c in cards]
            return items, [c.id for c in cards], f"{len(cards)} checkpoint(s)", *choices

        def show_detail(ids, evt: gr.SelectData):
            try:
                card, versions = service.detail(ids[evt.index])
            except (AppError, IndexError) as error:
                return None, gr.Row(visible=False), _error(error), None, None, "", gr.Row(visible=False)
            return (card.id, gr.Row(visible=True), render.detail_markdown(card, service.broken().get(card.id)),
                    render.preview_images(card),
                    [(render.thumbnail(v), render.caption(v)) for v in versions], render.timeline_markdown(card, versions),
                    gr.Row(visible=False))

        def ask_removal(checkpoint_id):
            return gr.Row(visible=True), f"Remove **{checkpoint_id}** and its files? This cannot be undone."

        def remove(checkpoint_id, token, *filter_values):
            try:
                service.remove(checkpoint_id, token=token)
                note = f"Removed {checkpoint_id}."
            except AppError as error:
                note = _error(error)
            items, ids, count, *choices = show_repository(*filter_values)
            return (gr.Row(visible=False), gr.Row(visible=False), None, items, ids, f"{note} {count}", *choices)

        gr.on([filter_button.click, search.submit, repository_tab.select], show_repository, filters, listing, **private)
        # One queue for the detail pane's events, run in the order they were asked: each listener
        # otherwise has its own, and a slow card selection finishing after "Remove…" hid its question.
        detail_events = dict(private, concurrency_id="repository-detail")
        gallery.select(show_detail, [shown_ids],
                       [chosen_id, detail_row, detail, detail_previews, timeline, timeline_text, confirm_row], **detail_events)
        remove_button.click(ask_removal, [chosen_id], [confirm_row, confirm_text], **detail_events)
        cancel_button.click(lambda: gr.Row(visible=False), None, [confirm_row], **detail_events)
        confirm_button.click(remove, [chosen_id, admin_token, *filters], [confirm_row, detail_row, chosen_id, *listing], **detail_events)

        # ---------------------------------------------------------------------- upload handlers
        def prefill(path):
            if not path:
                return *[""] * len(FORM_FIELDS), ""
            try:
                values = service.upload_form(path)
            except AppError as error:  # clear the form: values from an earlier file would be misleading
                return *[""] * len(FORM_FIELDS), f"**Refused:** {render.literal(error)}"
            return *[values[name] for name in FORM_FIELDS], "Read the file's metadata; check the form and save."

        def save(path, previews, token, *values):
            if not path:
                return "**Refused:** choose a .safetensors file first", *[NO_CHANGE()] * (2 + len(FORM_FIELDS))
            try:
                card = service.upload(path, dict(zip(FORM_FIELDS, values, strict=True)), previews or [], token=token)
            except AppError as error:
                return f"**Refused:** {render.literal(error)}", *[NO_CHANGE()] * (2 + len(FORM_FIELDS))
            cleared = [None, None, *[""] * len(FORM_FIELDS)]  # ready for the next checkpoint
            return f"**Added {card.id}** (`{card.trigger}`); ask for it in the chat.", *cleared

        checkpoint_file.upload(prefill, [checkpoint_file], [*form_boxes, upload_status], **private)
        save_upload.click(save, [checkpoint_file, preview_files, admin_token, *form_boxes],
                          [upload_status, checkpoint_file, preview_files, *form_boxes], **private)

        # ---------------------------------------------------------------------- settings handlers
        def store_settings(token, base_model_, llm_model_, budget_, upload_limit_, steps_):
            try:
                saved = service.save_settings(token=token, base_model=base_model_, llm_model=llm_model_, memory_budget_mb=budget_,
                                              upload_limit_mb=upload_limit_, steps=steps_)
            except (SettingsError, AppError) as error:
                return _error(error), NO_CHANGE(), NO_CHANGE()
            note = "**Saved.** A new base model or budget applies to the next image; a larger upload limit after a restart."
            limit = gr.File(label=f"Checkpoint (.safetensors, at most {saved.upload_limit_mb} MiB)")
            return note, llm_key_status(saved.llm_model), limit

        save_settings.click(store_settings, [admin_token, base_model, llm_model, budget, upload_limit, default_steps],
                            [settings_status, key_status, checkpoint_file], **private)

        # ---------------------------------------------------------------------- API for gradio_client
        def api_select(text: str, request: gr.Request) -> dict:
            """Start a request; returns action, message, checkpoint_id, trigger, prompt, options, nearest."""
            try:
                return service.select(request.session_hash, text).to_dict()
            except AppError as error:
                raise gr.Error(str(error)) from None

        def api_answer(answer: str = "", option: int = -1, request: gr.Request = None) -> dict:
            """Answer the open question: `option` (0-based) picks an option, else `answer` is the user's words."""
            try:
                return service.answer(request.session_hash, option if option >= 0 else answer).to_dict()
            except AppError as error:
                raise gr.Error(str(error)) from None

        gr.api(api_select, api_name="select")
        gr.api(api_answer, api_name="answer")

        with gr.Column(visible=False):
            api_prompt, api_checkpoint = gr.Textbox(label="prompt"), gr.Textbox(label="checkpoint_id")
            api_setting = gr.Textbox(label="setting", value=widths[0])
            api_taq = gr.Checkbox(True, label="taq")
            api_steps = gr.Number(service.settings.steps, label="steps", precision=0)
            api_guidance, api_seed = gr.Number(None, label="guidance"), gr.Number(0, label="seed", precision=0)
            api_image, api_info = gr.Image(type="pil", label="image"), gr.JSON(label="info")
            api_file = gr.File(label="checkpoint", type="filepath")
            api_previews = gr.File(label="previews", file_count="multiple", type="filepath")
            api_meta, api_card = gr.JSON(label="metadata"), gr.JSON(label="card")
            api_token = gr.Textbox(label="token")
            api_generate, api_upload = gr.Button(), gr.Button()

        def api_generate_fn(prompt, checkpoint_id, setting, taq, steps, guidance, seed, request: gr.Request):
            """One image for a prompt (with its trigger) and a checkpoint id; returns it and its label."""
            try:
                drawn = service.generate(prompt, checkpoint_id or None, setting=setting, taq=taq, steps=steps,
                                         guidance=guidance, seed=seed, client=request.session_hash)
            except AppError as error:
                raise gr.Error(str(error)) from None
            return drawn.image, drawn.to_dict()

        def api_upload_fn(checkpoint, previews, metadata, token: str | None = None):
            """Add a .safetensors checkpoint with optional previews and metadata (context-tuple keys).

            `token`: the admin token, where the server sets PERSONALQ_ADMIN_TOKEN."""
            if not checkpoint:
                raise gr.Error("send a .safetensors file")
            try:
                card = service.upload(checkpoint, metadata or {}, previews or [], token=token)
            except AppError as error:
                raise gr.Error(str(error)) from None
            return {"id": card.id, "trigger": card.trigger, "version": card.version, "category": card.category}

        api_generate.click(api_generate_fn, [api_prompt, api_checkpoint, api_setting, api_taq, api_steps, api_guidance,
                                             api_seed], [api_image, api_info], api_name="generate")
        api_upload.click(api_upload_fn, [api_file, api_previews, api_meta, api_token], [api_card], api_name="upload")

        def forget(request: gr.Request):
            service.end_session(request.session_hash)

        demo.unload(forget)
    return demo
