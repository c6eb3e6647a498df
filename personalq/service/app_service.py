"""The library facade behind the web app and its API: one object per running app.

Gradio handlers stay thin: each one calls a method here and renders what comes back. Everything that
decides something (which Check-in call a chat message is, what a bit-width change re-renders, what an
upload form means, when the demo repository is imported) lives here, so `gradio_client` scripts, tests
and the UI share one behaviour.
"""

from __future__ import annotations

import queue
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from personalq.config import personalq_home
from personalq.errors import first_line
from personalq.service import images
from personalq.service.access import AccessDenied, AccessPolicy
from personalq.service.chat import ChatReply, ChatSession, OptionCard
from personalq.service.rendering import (
    QUANTIZED_SETTINGS,
    AppError,
    Comparison,
    Progress,
    Rendered,
    describe,
    drain,
    read_guidance,
    read_whole,
    resolve_seed,
)
from personalq.service.settings import AppSettings
from personalq.library import _USE_DEMO_DEFAULT, open_repository
from personalq.setting import FLOAT_DTYPE_SETTINGS, SETTINGS

FORM_FIELDS = (
    "id", "triggers", "subject_types", "style_tags", "description", "created_at", "version",
    "environment", "category", "base_model", "kind",
)
"""The upload form, in the catalog contract's own key names (lists as comma-separated text)."""




class PersonalQService:
    """Store, Check-in and serving for one app process, plus every browser session's chat state."""

    def __init__(self, home: Path | None = None, settings: AppSettings | None = None, demo_repo: Path | None | Any = _USE_DEMO_DEFAULT,
                 max_sessions: int = 1000, access: AccessPolicy | None = None):
        """`demo_repo` defaults to `$PERSONALQ_DEMO_REPO` or the bundled demo, as for the CLI (`open_repository`)."""
        self.access = access or AccessPolicy.from_env()
        self.home = Path(home) if home is not None else personalq_home()
        self.home.mkdir(parents=True, exist_ok=True)
        self.settings = settings or AppSettings.load(self.home)
        opened = open_repository(self.home, self.settings.base_model, demo_repo=demo_repo)
        self.store, self.first_start_import = opened.repo, opened.first_start_import
        self._lock = threading.RLock()  # SQLite, Chroma and Check-in's snapshot are shared by all sessions
        self._checkin = None
        self._serving_lock = threading.Lock()  # one base model load, however many sessions ask at once
        self._queue = None
        self._manager = None
        self._sessions: OrderedDict[str, ChatSession] = OrderedDict()
        self._max_sessions = max_sessions
        self._examples: tuple[int, list[str]] = (-1, [])
        # Rendered PNGs live outside the data directory (which Gradio never serves), one folder per process.
        self.outputs = Path(tempfile.mkdtemp(prefix="personalq-images-"))

    # --- sessions ---------------------------------------------------------------------------------

    def session(self, session_id: str) -> ChatSession:
        """The session's state, created on first use; the least recently used are forgotten past the cap."""
        with self._lock:
            state = self._sessions.pop(session_id, None) or ChatSession()
            self._sessions[session_id] = state
            while len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
            return state

    def end_session(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    # --- Check-in -----------------------------------------------------------------------------------

    def _checkin_now(self):
        """Check-in follows the store's revision itself, so uploads and removals show in the next message."""
        from personalq.checkin import CheckIn

        if self._checkin is None:
            self._checkin = CheckIn(self.store, reranker=self._reranker())
        return self._checkin

    def _reranker(self):
        if not self.settings.llm_model:
            return None
        from personalq.checkin import LiteLLMReranker

        return LiteLLMReranker(self.settings.llm_model)

    def chat(self, session_id: str, text: str, now: datetime | None = None) -> ChatReply:
        """A typed message: the answer to an open question, unless it is plainly a new request."""
        state = self.session(session_id)
        if state.awaiting_answer and not self._is_new_request(state, text, now):
            return self.answer(session_id, text)
        return self.select(session_id, text, now=now)

    def _is_new_request(self, state: ChatSession, text: str, now: datetime | None) -> bool:
        """A message whose own candidates share none of the open question's is a new request, not an answer.

        "the realistic one" fits none or some of the bears asked about, so it answers; "my dog on the
        beach" typed while bears are offered selects a dog, which no option leads to, so it starts over.
        """
        with self._lock:
            fresh = self._checkin_now().conversation(now=now).ask((text or "").strip() or "?")
        return bool(fresh.plausible_ids) and not set(fresh.plausible_ids) & set(state.pending.plausible_ids)

    def select(self, session_id: str, text: str, now: datetime | None = None) -> ChatReply:
        """Start a new request, dropping any open question."""
        text = (text or "").strip()
        if not text:
            raise AppError("type what you want to make, e.g. " + (self.example_prompts(1) or ["my cartoon bear"])[0])
        with self._lock:
            conversation = self._checkin_now().conversation(now=now)
            result = conversation.ask(text)
            return self._settle(session_id, conversation, result)

    def _settle_chosen(self, session_id: str, prompt: str, card) -> ChatReply:
        state = self.session(session_id)
        state.conversation = state.pending = state.unmatched = None
        state.selected, state.prompt = card, prompt
        return ChatReply(action="select", message=f"you chose {card.id}", card=card, prompt=prompt)

    def choose(self, session_id: str, checkpoint_id: str) -> ChatReply:
        """Select a checkpoint by id: a clicked nearest suggestion, or "use in chat" in the repository.

        After a request nothing fitted, its words are kept with this checkpoint's trigger in the subject's place.
        """
        from personalq.checkin.rewrite import rewrite_prompt

        with self._lock:
            card = self._get(checkpoint_id)
        state = self.session(session_id)
        text, subject = state.unmatched or ("", None)
        prompt = rewrite_prompt(text, card.trigger, [subject] if subject else []) if text else card.trigger
        return self._settle_chosen(session_id, prompt, card)

    def answer(self, session_id: str, answer: str | int) -> ChatReply:
        """Answer the open question with free text or the index of one of its options."""
        state = self.session(session_id)
        if not state.awaiting_answer:
            raise AppError("there is no open question; type a request first")
        with self._lock:
            if isinstance(answer, int) and not isinstance(answer, bool):
                options = list(state.pending.options or [])
                if not 0 <= answer < len(options):
                    raise AppError(f"option {answer} does not exist; choose 0 to {len(options) - 1}")
                answer = options[answer]
            elif not str(answer).strip():
                raise AppError("type an answer or click one of the options")
            else:  # typing an option's words is the same as clicking it
                typed = answer.strip().lower()
                answer = next((o for o in state.pending.options or [] if o.label.strip().lower() == typed), answer)
            result = state.conversation.answer(answer)
            return self._settle(session_id, state.conversation, result)

    def _settle(self, session_id: str, conversation, result) -> ChatReply:
        state = self.session(session_id)
        result = self._one_option_per_checkpoint(result)
        if result.action == "clarify":
            state.conversation, state.pending = conversation, result
        else:
            state.conversation = state.pending = None
        reply = self._reply(result)
        if reply.action == "select":
            state.selected, state.prompt = reply.card, reply.prompt
        subject = conversation.intent.subject if conversation.intent is not None else None
        state.unmatched = (conversation.request, subject.words if subject else None) if reply.action == "no_match" else None
        return reply

    def _one_option_per_checkpoint(self, result):
        """A question with fewer than two options (checkpoints alike in every field) offers each checkpoint."""
        if result.action != "clarify" or len(result.options) >= 2:
            return result
        from personalq.checkin.checkin import ClarificationOption

        result.options = [ClarificationOption(i, [i], "id", i) for i in result.plausible_ids]
        return result

    def _reply(self, result) -> ChatReply:
        """Check-in's result with the cards it names looked up: option previews, nearest checkpoints."""
        options = [OptionCard(label=o.label, preview=self._first_preview(o.checkpoint_ids), checkpoint_ids=list(o.checkpoint_ids),
                              summary=_summary(self._cards(o.checkpoint_ids))) for o in result.options]
        if result.action == "clarify":
            message = _question([o.label for o in options], len(result.plausible_ids))
        else:
            message = result.reason or ""
        return ChatReply(action=result.action, message=message, card=result.card, prompt=result.rewritten_prompt,
                         options=options, nearest=self._cards(result.nearest))

    def _cards(self, checkpoint_ids) -> list:
        return [self.store.get(i) for i in checkpoint_ids if i in self.store]

    def _first_preview(self, checkpoint_ids) -> Path | None:
        return next((card.previews[0] for card in self._cards(checkpoint_ids) if card.previews), None)

    def example_prompts(self, limit: int = 6) -> list[str]:
        """Requests built from the repository's own checkpoints that Check-in answers (selects or asks)."""
        with self._lock:
            cards = sorted(self.store.cards(), key=lambda c: c.created_at, reverse=True)
            if self._examples[0] == self.store.revision:
                return self._examples[1][:limit]
            candidates = list(dict.fromkeys(_example_for(c) for c in cards))
            checkin = self._checkin_now()
            found = [t for t in candidates if checkin.conversation().ask(t).action in ("select", "clarify")]
            self._examples = (self.store.revision, found)
        return found[:limit]

    # --- generation ---------------------------------------------------------------------------------

    def bit_widths(self) -> list[str]:
        """The serving device's full precision (FP16 on a GPU, FP32 on CPU), then the quantized settings it can run."""
        from personalq.serving.config import resolve_device_dtype

        device, dtype = resolve_device_dtype(None, None)
        full = FLOAT_DTYPE_SETTINGS[str(dtype).removeprefix("torch.")]
        return [full, *(name for name in QUANTIZED_SETTINGS if SETTINGS[name].refusal(device.type) is None)]

    def _request_queue(self):
        """The serving queue, loading the base model on first use (seconds to minutes, so callers report it)."""
        with self._serving_lock:
            if self._queue is None:
                from personalq.cluster.client import renderer_for  # the Ray deployment when PERSONALQ_RAY_ADDRESS is set
                from personalq.serving import RequestQueue, ServingConfig, ServingError

                config = ServingConfig(base_model=self.settings.base_model,
                                       memory_budget_bytes=self.settings.memory_budget_bytes)
                try:
                    self._manager = renderer_for(config, store=self.store)
                except ServingError as error:
                    raise AppError(first_line(error)) from None
                self._queue = RequestQueue(self._manager, workers=1)
            return self._queue

    def generate_events(self, prompt: str, checkpoint_id: str | None, setting: str = "FP32", taq: bool = True,
                        steps: int = 20, guidance: float | str | None = None, seed: int | str | None = 0,
                        client: str | None = None) -> Iterator[Progress | Rendered]:
        """Queue one image and yield its progress events, then the `Rendered` image (saved as a PNG).

        The work runs on the serving queue's worker, so the caller (a Gradio handler) stays free to
        stream progress, and concurrent sessions are served in fair order rather than all at once.
        A blank or negative seed draws a random one, which the label and the PNG then show.
        """
        request = self._request(prompt, checkpoint_id, setting, taq, steps, guidance, seed, client)
        if self._queue is None:
            yield Progress(0, 0, f"Loading the base model {self.settings.base_model}")
        events: queue.Queue = queue.Queue()
        handle = self._submit(request, lambda step, total, message: events.put(Progress(step, total, message)))
        running = self.session(client).running if client else set()
        running.add(handle)
        try:
            yield from drain(handle, events)
            result = handle.result()
        except Exception as error:
            raise AppError("cancelled" if handle.cancelled() else first_line(error)) from error
        finally:
            handle.cancel()  # a no-op when finished; stops the render when the caller went away
            running.discard(handle)
        yield self._rendered(request, result)

    def _request(self, prompt, checkpoint_id, setting, taq, steps, guidance, seed, client):
        from personalq.serving import GenerationRequest

        prompt = (prompt or "").strip()
        if not prompt:
            raise AppError("the prompt is empty; ask for a checkpoint first or type a prompt")
        if setting not in self.bit_widths():
            raise AppError(f"unknown bit-width {setting!r}; choose one of {', '.join(self.bit_widths())}")
        steps = read_whole(steps, "steps", 20)
        if steps < 1:
            raise AppError("steps must be at least 1")
        return GenerationRequest(prompt=prompt, checkpoint_id=checkpoint_id or None, setting=setting, taq=bool(taq),
                                 steps=steps, guidance=read_guidance(guidance), seed=resolve_seed(seed), client=client)

    def _submit(self, request, progress):
        from personalq.serving import ServingError

        try:
            return self._request_queue().submit(request, progress=progress)
        except ServingError as error:  # the queue is full
            raise AppError(first_line(error)) from None

    def _rendered(self, request, result) -> Rendered:
        """The result labelled, measured (the UNet variant's own bytes) and written as a PNG with its parameters."""
        setting = request.setting + (("+TAQ" if request.taq else "-noTAQ") if request.setting in QUANTIZED_SETTINGS else "")
        rendered = Rendered(image=result.image, label="", result=result, prompt=request.prompt, guidance=request.guidance,
                            taq=request.taq, variant_bytes=self._variant_bytes(request))
        rendered = replace(rendered, label=describe(rendered))
        parameters = images.parameters_text(request.prompt, steps=request.steps, guidance=request.guidance,
                                            seed=result.seed, size=result.image.size, base_model=self.settings.base_model,
                                            checkpoint=result.checkpoint_id, setting=setting, seconds=result.seconds)
        name = images.file_name(result.checkpoint_id, setting, result.seed, request.steps)
        folder = Path(tempfile.mkdtemp(dir=self.outputs))  # one folder per image: the name stays what it says
        return replace(rendered, path=images.save_png(result.image, folder / name, parameters))

    def _variant_bytes(self, request) -> int:
        """Bytes of the UNet variant that drew the image (FP32 UNet, or its quantized copy), from serving's cache."""
        protect = "trigger" if request.taq else "none"
        wanted = (lambda name: name.endswith(f":{request.setting}:{protect}")) if request.setting in QUANTIZED_SETTINGS \
            else (lambda name: name == "unet:base" or name.startswith("dreambooth:"))
        entries = self._manager.resident() if hasattr(self._manager, "resident") else []  # a Ray renderer holds none here
        return next((nbytes for name, _, nbytes in reversed(entries) if wanted(name)), 0)

    def generate(self, prompt: str, checkpoint_id: str | None, progress: Callable[[Progress], None] | None = None,
                 **options) -> Rendered:
        """`generate_events` for callers that only want the image."""
        for event in self.generate_events(prompt, checkpoint_id, **options):
            if isinstance(event, Rendered):
                return event
            if progress is not None:
                progress(event)
        raise AppError("generation ended without an image")

    def session_generate_events(self, session_id: str, prompt: str | None = None, **options) -> Iterator[Progress | Rendered]:
        """Render the session's selected checkpoint: the edited prompt when given, else the rewritten one."""
        state = self.session(session_id)
        if state.selected is None:
            raise AppError("no checkpoint is selected yet; tell me what you want to make")
        prompt = (prompt or "").strip() or state.prompt
        state.prompt = prompt
        for event in self.generate_events(prompt, state.selected.id, client=session_id, **options):
            if isinstance(event, Rendered):
                state.keep(event)
            yield event

    def compare_events(self, session_id: str, settings: list[str], prompt: str | None = None, seed: int | str | None = None,
                       **options) -> Iterator[Progress | Comparison]:
        """The same prompt, seed and checkpoint at each setting, full precision first, then the differences to it."""
        full = self.bit_widths()[0]
        chosen = [full, *dict.fromkeys(s for s in settings or [] if s != full)]
        if not 2 <= len(chosen) <= 4:
            raise AppError(f"choose 1 to 3 settings to compare with {full}")
        seed = resolve_seed(seed)  # one seed for all, so only the setting differs
        variants = []
        for setting in chosen:
            for event in self.session_generate_events(session_id, prompt, setting=setting, seed=seed, **options):
                if isinstance(event, Progress):
                    yield Progress(event.step, event.total, f"{setting} ({len(variants) + 1} of {len(chosen)}): {event.message}")
                else:
                    variants.append(event)
        yield Comparison.of(variants)

    def cancel(self, session_id: str) -> int:
        """Stop the session's queued and running renders; returns how many were stopped."""
        return self.session(session_id).cancel_all()

    # --- repository ---------------------------------------------------------------------------------

    def repository(self, category: str | None = None, style: str | None = None, created_from: str | None = None,
                   created_to: str | None = None, text: str | None = None) -> list:
        """Cards matching the filters, newest first; dates may be ISO or words ("last month")."""
        start, end = _parse_date(created_from, "from"), _parse_date(created_to, "to")
        if start and end and _moment(start) > _moment(end, end_of_day=True):
            raise AppError("the 'from' date is after the 'to' date")
        with self._lock:
            cards = self.store.list(category=category or None, style=style or None, created_from=start,
                                    created_to=end, text=(text or "").strip() or None)
        return sorted(cards, key=lambda c: c.created_at, reverse=True)

    def facets(self) -> tuple[list[str], list[str]]:
        """The categories and style tags present in the store, for the filter dropdowns."""
        with self._lock:
            cards = self.store.cards()
        return sorted({c.category for c in cards}), sorted({s for c in cards for s in c.style_tags})

    def detail(self, checkpoint_id: str) -> tuple[Any, list]:
        """A card and every version of the same concept (its category), oldest first, for the timeline."""
        with self._lock:
            card = self._get(checkpoint_id)
            versions = self.store.list(category=card.category)
        return card, sorted(versions, key=lambda c: (c.created_at, c.version or 0))

    def broken(self) -> dict[str, str]:
        """Checkpoints that failed to attach or render (id -> reason); serving refuses them until re-added."""
        with self._lock:
            return self.store.broken()

    def remove(self, checkpoint_id: str, token: str | None = None) -> None:
        self._allow(self.access.check_admin, token, "removing a checkpoint")
        with self._lock:
            self._get(checkpoint_id)
            self.store.remove(checkpoint_id)
            for state in self._sessions.values():
                if state.selected is not None and state.selected.id == checkpoint_id:
                    state.selected = state.prompt = None

    def _get(self, checkpoint_id: str):
        try:
            return self.store.get(checkpoint_id)
        except KeyError:
            raise AppError(f"no checkpoint {checkpoint_id!r} in the repository") from None

    @staticmethod
    def _allow(check: Callable[..., None], *args) -> None:
        try:
            check(*args)
        except AccessDenied as error:
            raise AppError(str(error)) from None

    # --- upload -------------------------------------------------------------------------------------

    def check_upload_size(self, path: Path) -> None:
        size, limit_mb = Path(path).stat().st_size, self.settings.upload_limit_mb
        if size > limit_mb * 2**20:
            raise AppError(f"{Path(path).name} is {size / 2**20:.1f} MiB; the upload limit is {limit_mb} MiB")

    def upload_form(self, path: Path) -> dict[str, str]:
        """The upload form prefilled from the file's header and its sidecar, as editable text."""
        from personalq.store import StoreError

        if not self.access.uploads_enabled:  # not even the header is parsed
            raise AppError("uploads are turned off on this server")
        self.check_upload_size(path)
        try:
            meta = self.store.read_file_metadata(Path(path))
        except StoreError as error:
            raise AppError(first_line(error)) from None
        return {name: _as_text(meta.get(name)) for name in FORM_FIELDS}

    def header_thumbnail(self, path: Path) -> bytes | None:
        """The thumbnail a file's header carries (ModelSpec), decoded and re-encoded clean; None when it has none.

        The store uses it as the preview when the upload brings no preview images, so the form shows it first.
        """
        from personalq.store import StoreError
        from personalq.store.images import clean_image
        from personalq.store.safetensors_file import read_header, thumbnail_bytes

        self.upload_form(path)  # the same checks: uploads on, size, a readable header
        try:
            data = thumbnail_bytes(read_header(Path(path)).metadata)
            return None if data is None else clean_image(data, "modelspec.thumbnail").data
        except StoreError as error:
            raise AppError(first_line(error)) from None

    @staticmethod
    def refusal_field(error: Exception) -> str | None:
        """The form field a refusal names ("created_at: 'nope' is not an ISO-8601 date" -> "created_at"), if any."""
        head = str(error).split(":", 1)[0].split(".", 1)[0].strip()
        return head if head in FORM_FIELDS else None

    def upload(self, path: Path, form: dict[str, Any], previews: list[Path] = (), token: str | None = None):
        """Validate, store and index at once; a refusal leaves the store as it was."""
        from personalq.store import StoreError

        self._allow(self.access.check_upload, token)
        path = Path(path)
        if path.suffix.lower() != ".safetensors":
            raise AppError(f"{path.name}: only .safetensors checkpoints are accepted (pickle formats can run code)")
        self.check_upload_size(path)
        meta = {k: v for k, v in form.items() if k in FORM_FIELDS and str(v if v is not None else "").strip()}
        with self._lock:
            try:
                return self.store.add(path, meta=meta, previews=[Path(p) for p in previews or []])
            except StoreError as error:
                raise AppError(first_line(error)) from None

    # --- settings -----------------------------------------------------------------------------------

    def settings_values(self) -> dict[str, Any]:
        """The settings saved now (the file may have changed since start-up, by another tab or process)."""
        with self._lock:
            return dict(AppSettings.load(self.home).__dict__)

    def save_settings(self, token: str | None = None, **changes) -> AppSettings:
        """Persist the changed values over what is saved now; a new base model or budget restarts serving.

        Only the fields given change: another tab's save, or a value the user never touched, stays.
        """
        self._allow(self.access.check_admin, token, "changing settings")
        with self._lock:
            saved = AppSettings.load(self.home)
            new = AppSettings.from_values(**{**saved.__dict__, **changes})
            new.save(self.home)
            if (new.base_model, new.memory_budget_mb) != (self.settings.base_model, self.settings.memory_budget_mb):
                self._close_serving()
            if new.llm_model != self.settings.llm_model:
                self._checkin = None
            self.settings = new
        return new

    def _close_serving(self) -> None:
        if self._queue is not None and hasattr(self._queue, "close"):
            self._queue.close()
        self._queue = self._manager = None

    def close(self) -> None:
        self._close_serving()
        if hasattr(self.store, "close"):
            self.store.close()


def _as_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).date().isoformat() if value.time() == datetime.min.time() else value.isoformat()
    return str(value)


def _moment(value: date | datetime, end_of_day: bool = False) -> datetime:
    """A date or datetime as an aware datetime, so an ISO day and "last month" compare ("to" days end at midnight)."""
    if not isinstance(value, datetime):
        value = datetime.combine(value, datetime.max.time() if end_of_day else datetime.min.time())
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _parse_date(text: str | None, which: str) -> date | datetime | None:
    """ISO dates or ordinary words ("2025-04-01", "April 2025", "last month"), through dateparser."""
    if not text or not str(text).strip():
        return None
    import dateparser

    moment = dateparser.parse(str(text), settings={"TIMEZONE": "UTC", "RETURN_AS_TIMEZONE_AWARE": True,
                                                   "PREFER_DAY_OF_MONTH": "first" if which == "from" else "last"})
    if moment is None:
        raise AppError(f"cannot read the '{which}' date {text!r}; try 2025-04-01 or 'April 2025'")
    # A bare day means the whole day; the store reads a date (not a datetime) that way.
    return moment.date() if moment.time() == datetime.min.time() else moment


def _question(labels: list[str], fitting: int) -> str:
    """"Do you want A, B or C?" from the options' own labels (never an empty slot)."""
    labels = [label for label in labels if label.strip()]
    choice = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " or " + labels[-1]
    more = f" ({fitting} fit; click one or say more)" if fitting > len(labels) else ""
    return f"Do you want {choice}?{more}"


def _summary(cards: list) -> str:
    """What an option leads to: one checkpoint's id, version, style and date, or how many."""
    if len(cards) != 1:
        return f"{len(cards)} checkpoints"
    card = cards[0]
    parts = [card.id, f"v{card.version}" if card.version is not None else None,
             card.style_tags[0] if card.style_tags else None, card.created_at.date().isoformat()]
    return " · ".join(p for p in parts if p)


def _example_for(card) -> str:
    """A request a person might type for this checkpoint: its first style and its category."""
    style = f"{card.style_tags[0]} " if card.style_tags else ""
    return f"my {style}{card.category}"
