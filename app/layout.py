"""The page: every component of the four tabs and where it sits, and nothing that reacts to anything.

`build_app` lays the page out, then hands each tab's components to that tab's handlers module
(`app/chat_tab.py`, `repository_tab.py`, `upload_tab.py`, `settings_tab.py`) and the API to `app/api.py`.
The Chat tab opens on the product's demonstration: ask for a checkpoint, then Compare bit-widths.
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from app import api, chat_tab, render, repository_tab, settings_tab, upload_tab
from personalq.service import FORM_FIELDS, PersonalQService

CSS = """
#renders img, #compare img { image-rendering: pixelated; }
#compare .caption-label, #renders .caption-label, #options .caption-label, #nearest .caption-label,
#repo-gallery .caption-label { white-space: normal; overflow: visible; text-overflow: clip; font-size: 0.8rem; }
.field-refusal, .field-refusal * { color: #b91c1c !important; font-size: 0.85rem; min-height: 0; }
"""
"""PQ-Nano draws 64x64 images: shown large and crisp; captions wrap instead of being cut off."""

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


FIT = "max-content"
"""Gallery height that shows every row: Gradio's None and "auto" cap it and hide the second row of Compare."""


def build_app(service: PersonalQService) -> gr.Blocks:
    # Generated images pile up in Gradio's cache; drop those older than a day, checking hourly.
    with gr.Blocks(title="PersonalQ", delete_cache=(3600, 86400)) as demo:
        gr.Markdown("## PersonalQ — your personalized checkpoints, picked by chat and served quantized")
        # Server-wide changes (upload, removal, settings) need this when PERSONALQ_ADMIN_TOKEN is set.
        admin_token = gr.Textbox(label="Admin token (needed to upload, remove or change settings)", type="password",
                                 visible=service.access.locked, elem_id="admin-token")
        with gr.Tabs() as tabs:
            with gr.Tab("Chat", id="chat"):
                chat = _chat(service)
            with gr.Tab("Repository", id="repository") as repository_tab_:
                repository = _repository(service)
            with gr.Tab("Upload", id="upload", visible=service.access.uploads_enabled):
                upload = _upload(service)
            with gr.Tab("Settings", id="settings") as settings_tab_:
                settings = _settings()
        chat_tab.ChatHandlers(service, chat).wire(demo)
        repository_tab.RepositoryHandlers(service, repository, admin_token, chat, tabs).wire(repository_tab_)
        upload_tab.UploadHandlers(service, upload, admin_token).wire()
        settings_tab.SettingsHandlers(service, settings, admin_token, upload).wire(demo, settings_tab_)
        api.wire(service, demo)
    return demo


def _chat(service: PersonalQService) -> SimpleNamespace:
    widths = service.bit_widths()
    v = SimpleNamespace()
    with gr.Row():
        with gr.Column(scale=3):
            v.chatbot = gr.Chatbot(label="Check-in", height=360, elem_id="chat", buttons=["copy"], feedback_options=None,
                                   placeholder=render.chat_placeholder(service.example_prompts()))
            v.options = gr.Gallery(label="Choose one", visible=False, columns=4, height=FIT, allow_preview=False,
                                   elem_id="options", object_fit="contain")
            v.nearest = gr.Gallery(label="Nearest checkpoints: click one to use it", visible=False, columns=4,
                                   height=FIT, allow_preview=False, elem_id="nearest", object_fit="contain")
            v.nearest_ids = gr.State([])
            v.examples = gr.Dataset(components=[gr.Textbox(visible=False)], samples=[], label="Try one of yours",
                                    elem_id="examples", samples_per_page=8)
            with gr.Row():
                v.message = gr.Textbox(show_label=False, scale=5, elem_id="message", submit_btn=False,
                                       placeholder="Ask for a checkpoint in your words, or pick an example above")
                v.send = gr.Button("Send", variant="secondary", scale=1, elem_id="send")
            with gr.Row():
                v.prompt = gr.Textbox(label="Prompt for the model (editable)", scale=4, elem_id="prompt")
                v.compare = gr.Button("Compare bit-widths", variant="primary", scale=2, elem_id="compare-button")
                v.render = gr.Button("Render", scale=1, elem_id="render")
                v.cancel = gr.Button("Cancel", variant="stop", scale=1, elem_id="cancel")
            v.status = gr.Markdown(elem_id="status")
        with gr.Column(scale=2, min_width=260):
            v.compare_with = gr.CheckboxGroup(widths[1:], value=widths[1:3], label=f"Compare {widths[0]} with (1 to 3)",
                                              elem_id="compare-settings")
            v.setting = gr.Radio(widths, value=widths[0], label="Bit-width of Render", elem_id="bitwidth",
                                 info="Changing it renders the prompt again, beside the last image")
            v.taq = gr.Checkbox(True, label="TAQ: keep the trigger tokens at full precision", elem_id="taq")
            v.steps = gr.Slider(1, 100, value=service.settings.steps, step=1, label="Steps", elem_id="steps")
            v.guidance = gr.Textbox("", label="Guidance (blank: the model's default)", elem_id="guidance")
            with gr.Row():
                v.seed = gr.Number(0, precision=0, label="Seed (blank: random)", elem_id="seed", scale=2)
                v.random_seed = gr.Checkbox(False, label="New seed each time", elem_id="random-seed", scale=1)
            v.download = gr.DownloadButton("Download PNG", value=None, elem_id="download", interactive=False)
    v.comparison = gr.Gallery(label="Side by side: same prompt, seed and checkpoint; then |difference| to full precision",
                              columns=4, height=FIT, fit_columns=False, format="png", elem_id="compare", object_fit="contain", visible=False)
    v.renders = gr.Gallery(label="Your images (newest first, lossless PNG)", columns=6, height=FIT, fit_columns=False, format="png",
                           elem_id="renders", object_fit="contain")
    v.generation = [v.setting, v.taq, v.steps, v.guidance, v.seed, v.random_seed]
    return v


def _repository(service: PersonalQService) -> SimpleNamespace:
    categories, styles = service.facets()
    v = SimpleNamespace()
    with gr.Row():
        v.search = gr.Textbox(label="Search", placeholder="words, trigger or id", elem_id="repo-search", scale=2)
        v.category = gr.Dropdown(["", *categories], value="", label="Category", allow_custom_value=True, elem_id="repo-category")
        v.style = gr.Dropdown(["", *styles], value="", label="Style", allow_custom_value=True, elem_id="repo-style")
        v.created_from = gr.Textbox(label="Created from", placeholder="2025-04-01 or April 2025", elem_id="repo-from")
        v.created_to = gr.Textbox(label="Created to", placeholder="2025-06-30 or last month", elem_id="repo-to")
    v.show = gr.Button("Show", elem_id="repo-filter")
    v.status = gr.Markdown(elem_id="repo-status")
    v.gallery = gr.Gallery(label="Checkpoints", columns=6, height=560, fit_columns=False, allow_preview=False, elem_id="repo-gallery",
                           object_fit="contain")
    v.shown_ids, v.chosen_id = gr.State([]), gr.State(None)
    with gr.Row(visible=False) as v.detail_row:
        with gr.Column(scale=2):
            v.detail = gr.Markdown(elem_id="repo-detail")
            with gr.Row():
                v.use = gr.Button("Use in chat", variant="primary", elem_id="repo-use")
                v.trigger = gr.Textbox(label="Trigger", interactive=False, buttons=["copy"], elem_id="repo-trigger")
        with gr.Column(scale=2):
            v.previews = gr.Gallery(label="Previews", columns=4, height=FIT, fit_columns=False, elem_id="repo-detail-previews")
            v.timeline = gr.Gallery(label="Versions of this concept, oldest first", columns=6, height=FIT, fit_columns=False,
                                    allow_preview=False)
            v.timeline_text = gr.Markdown(elem_id="repo-timeline")
            v.remove = gr.Button("Remove…", variant="stop", elem_id="repo-remove")
            with gr.Row(visible=False) as v.confirm_row:
                v.confirm_text = gr.Markdown()
                v.confirm = gr.Button("Yes, remove it", variant="stop", elem_id="repo-confirm")
                v.keep = gr.Button("Keep it", elem_id="repo-cancel")
    v.filters = [v.category, v.style, v.created_from, v.created_to, v.search]
    return v


def _upload(service: PersonalQService) -> SimpleNamespace:
    v = SimpleNamespace(form={}, refusals={})
    with gr.Row():
        v.file = gr.File(label=f"Checkpoint (.safetensors, at most {service.settings.upload_limit_mb} MiB)",
                         file_types=[".safetensors"], type="filepath", elem_id="upload-file")
        v.previews = gr.File(label="Preview images", file_count="multiple", file_types=["image"], type="filepath",
                             elem_id="upload-previews")
    v.file_refusal = gr.Markdown(elem_id="upload-file-refusal", elem_classes=["field-refusal"])
    v.shown_previews = gr.Gallery(label="Previews as they will be shown", columns=6, height=FIT, fit_columns=False, allow_preview=False,
                                  elem_id="upload-preview-gallery", visible=False)
    gr.Markdown("The form is filled from the file's header and sidecar; edit anything before saving. Lists are comma-separated.")
    with gr.Row():
        for names in (FORM_FIELDS[:6], FORM_FIELDS[6:]):
            with gr.Column():
                for name in names:
                    v.form[name] = gr.Textbox(label=FORM_LABELS[name], elem_id=f"form-{name}",
                                              lines=3 if name == "description" else 1)
                    v.refusals[name] = gr.Markdown(elem_id=f"form-{name}-refusal", elem_classes=["field-refusal"])
    v.save = gr.Button("Validate and add to the repository", variant="primary", elem_id="upload-save")
    v.status = gr.Markdown(elem_id="upload-status")
    v.boxes = [v.form[name] for name in FORM_FIELDS]
    return v


def _settings() -> SimpleNamespace:
    """Empty until the page loads: the handlers fill in the values saved now, not those at start-up."""
    v = SimpleNamespace()
    v.base_model = gr.Textbox(label="Base model", elem_id="settings-base",
                              info="pq-nano (shipped), a hub id, a diffusers folder or a single-file checkpoint")
    v.llm_model = gr.Textbox(label="Check-in LLM (LiteLLM model name)", elem_id="settings-llm",
                             info="Empty: the offline deterministic Check-in. Keys come from the environment.")
    v.key_status = gr.Markdown()
    v.budget = gr.Textbox(label="Memory budget (MiB, blank: no limit)", elem_id="settings-budget")
    v.upload_limit = gr.Number(label="Upload size limit (MiB)", precision=0, elem_id="settings-upload-limit")
    v.steps = gr.Number(label="Default sampling steps", precision=0, elem_id="settings-steps")
    v.save = gr.Button("Save settings", variant="primary", elem_id="settings-save")
    v.status = gr.Markdown(elem_id="settings-status")
    v.shown = gr.State({})  # the values the form showed when loaded: only fields that differ are saved
    v.fields = {"base_model": v.base_model, "llm_model": v.llm_model, "memory_budget_mb": v.budget,
                "upload_limit_mb": v.upload_limit, "steps": v.steps}
    return v
