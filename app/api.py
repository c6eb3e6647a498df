"""The named endpoints `gradio_client` scripts call: select, answer, generate, compare, upload.

Each is one service call; a refusal becomes `gr.Error` with the service's one line. The session is the
client's own (Gradio's session hash), exactly as for a browser tab.
"""

from __future__ import annotations

import gradio as gr

from personalq.service import AppError, PersonalQService


def _refused(call):
    try:
        return call()
    except AppError as error:
        raise gr.Error(str(error)) from None


def wire(service: PersonalQService, demo: gr.Blocks) -> None:
    full = service.bit_widths()[0]

    def select(text: str, request: gr.Request) -> dict:
        """Start a request; returns action, message, checkpoint_id, trigger, prompt, options, nearest."""
        return _refused(lambda: service.select(request.session_hash, text).to_dict())

    def answer(answer: str = "", option: int = -1, request: gr.Request = None) -> dict:
        """Answer the open question: `option` (0-based) picks an option, else `answer` is the user's words."""
        return _refused(lambda: service.answer(request.session_hash, option if option >= 0 else answer).to_dict())

    def compare(settings: list[str], prompt: str = "", seed: int = -1, steps: int = 0, request: gr.Request = None) -> dict:
        """The session's selected checkpoint at full precision and each of `settings` with one seed (-1: random);
        returns each variant's label, seed, seconds and variant_bytes, and each mean difference to full precision."""
        options = dict(seed=seed, steps=steps or service.settings.steps)
        return _refused(lambda: _last(service.compare_events(request.session_hash, settings, prompt or None, **options)).to_dict())

    gr.api(select, api_name="select")
    gr.api(answer, api_name="answer")
    gr.api(compare, api_name="compare")

    with gr.Column(visible=False):
        prompt, checkpoint = gr.Textbox(label="prompt"), gr.Textbox(label="checkpoint_id")
        setting, taq = gr.Textbox(label="setting", value=full), gr.Checkbox(True, label="taq")
        steps = gr.Number(service.settings.steps, label="steps", precision=0)
        guidance, seed = gr.Number(None, label="guidance"), gr.Number(0, label="seed", precision=0)
        image, info = gr.Image(type="filepath", label="image", format="png"), gr.JSON(label="info")
        file, previews = gr.File(label="checkpoint", type="filepath"), gr.File(label="previews", file_count="multiple", type="filepath")
        metadata, card, token = gr.JSON(label="metadata"), gr.JSON(label="card"), gr.Textbox(label="token")
        generate_button, upload_button = gr.Button(), gr.Button()

    def generate(prompt, checkpoint_id, setting, taq, steps, guidance, seed, request: gr.Request):
        """One image for a prompt (with its trigger) and a checkpoint id: the PNG (parameters inside) and its label."""
        drawn = _refused(lambda: service.generate(prompt, checkpoint_id or None, setting=setting, taq=taq, steps=steps,
                                                  guidance=guidance, seed=seed, client=request.session_hash))
        return str(drawn.path), drawn.to_dict()

    def upload(checkpoint, previews, metadata, token: str | None = None):
        """Add a .safetensors checkpoint with optional previews and metadata (context-tuple keys).

        `token`: the admin token, where the server sets PERSONALQ_ADMIN_TOKEN."""
        if not checkpoint:
            raise gr.Error("send a .safetensors file")
        added = _refused(lambda: service.upload(checkpoint, metadata or {}, previews or [], token=token))
        return {"id": added.id, "trigger": added.trigger, "version": added.version, "category": added.category}

    generate_button.click(generate, [prompt, checkpoint, setting, taq, steps, guidance, seed], [image, info], api_name="generate")
    upload_button.click(upload, [file, previews, metadata, token], [card], api_name="upload")

    def forget(request: gr.Request):
        service.end_session(request.session_hash)

    demo.unload(forget)


def _last(events):
    last = None
    for last in events:
        pass
    return last
