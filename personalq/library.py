"""PersonalQ in one object: the repository, Check-in and serving over one data directory.

    from personalq import PersonalQ

    pq = PersonalQ()                                # $PERSONALQ_HOME, else repo_store/
    result = pq.select("my cartoon bear at the beach")
    if result.action == "clarify":
        result = pq.answer(0)                       # an option's index, or words ("the watercolor one")
    if result.action == "select":
        pq.generate(result.rewritten_prompt, result.checkpoint_id, setting="W8A8").image.save("bear.png")

`open_repository` is the one way a data directory is opened for use, by this object, the CLI and the
app alike: the store repairs what a crash left (orphan files, rows without files), and an empty
catalog is filled from the demo repository, so a fresh CLI sees what a fresh app shows.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from personalq.config import ASSETS_DIR, personalq_home
from personalq.protocols import Embedder, RerankerBackend
from personalq.store import RepoStore
from personalq.store.errors import ImportReport
from personalq.store.weights import served_bases

# Check-in and serving are imported where first used: measured on the 2-core dev machine, importing them
# adds 3.5 s and 4.9 s (sentence-transformers, torch, diffusers) to every `personalq repo ...` command,
# which opens the repository through this module and never selects or renders.
if TYPE_CHECKING:
    from personalq.checkin import CheckIn, CheckInResult, Conversation
    from personalq.serving import GenerationResult, PipelineManager

DEMO_REPO_ENV = "PERSONALQ_DEMO_REPO"
_OFF = {"", "0", "off", "false", "no", "none"}


def demo_repo_dir() -> Path | None:
    """The folder an empty repository is filled from: `$PERSONALQ_DEMO_REPO`, else the bundled
    `assets/demo_repo`; `PERSONALQ_DEMO_REPO=off` starts empty."""
    configured = os.environ.get(DEMO_REPO_ENV)
    if configured is None:
        return ASSETS_DIR / "demo_repo"
    return None if configured.strip().lower() in _OFF else Path(configured).expanduser()


@dataclass(frozen=True)
class Opened:
    """A repository opened for use, and what its first start imported (None when nothing was)."""

    repo: RepoStore
    first_start_import: ImportReport | None


_USE_DEMO_DEFAULT: Any = object()


def open_repository(home: Path | str | None = None, base_model: str | None = None, demo_repo: Path | None | Any = _USE_DEMO_DEFAULT,
                    embedder: Embedder | None = None) -> Opened:
    """Open HOME (default `$PERSONALQ_HOME`) the way the app does on start.

    Uploads are validated against `base_model` when it is a local diffusers folder; `demo_repo` (default
    `demo_repo_dir()`, None for none) is imported when the catalog is empty.
    """
    repo = RepoStore.open(home, embedder=embedder, bases=served_bases(base_model))
    source = demo_repo_dir() if demo_repo is _USE_DEMO_DEFAULT else demo_repo
    first = None
    if source is not None and Path(source).is_dir() and not repo.cards():
        first = repo.import_dir(Path(source))
    return Opened(repo, first)


def saved_settings(home: Path | str | None = None):
    """The app's settings for HOME: its saved `settings.json` over the environment over the defaults."""
    # Imported here, not at the top: AppSettings lives in personalq.service, whose package __init__ imports
    # the app service, which is to open its repository through this module; a top-level import would then
    # meet this module half-initialised.
    from personalq.service.settings import AppSettings

    return AppSettings.load(Path(home).expanduser() if home is not None else personalq_home())


class PersonalQ:
    """The repository in HOME with Check-in and serving on top.

    `settings` gives `base_model`, `llm_model` and `memory_budget_bytes` (default: the app's saved
    settings, `$PERSONALQ_HOME/settings.json` over the environment). `reranker` replaces the LiteLLM
    reranker that `llm_model` names. Check-in is built on first `select`, the base model loaded on
    first `generate` (seconds to minutes).
    """

    def __init__(self, home: Path | str | None = None, settings=None, *, demo_repo: Path | None | Any = _USE_DEMO_DEFAULT,
                 embedder: Embedder | None = None, reranker: RerankerBackend | None = None):
        self.home = Path(home).expanduser().resolve() if home is not None else personalq_home()
        self.home.mkdir(parents=True, exist_ok=True)
        self.settings = settings if settings is not None else saved_settings(self.home)
        opened = open_repository(self.home, self.settings.base_model, demo_repo, embedder)
        self.repo, self.first_start_import = opened.repo, opened.first_start_import
        self._reranker = reranker
        self._checkin: CheckIn | None = None
        self._conversation: Conversation | None = None
        self._manager: PipelineManager | None = None
        self._serving_lock = threading.Lock()  # one base model load, however many threads ask at once

    # --- Check-in ---------------------------------------------------------------------------------

    @property
    def checkin(self) -> CheckIn:
        """Check-in over this repository; it follows the store's revision, so later adds show at once."""
        if self._checkin is None:
            from personalq.checkin import CheckIn, LiteLLMReranker

            reranker = self._reranker
            if reranker is None and self.settings.llm_model:
                reranker = LiteLLMReranker(self.settings.llm_model)
            self._checkin = CheckIn(self.repo, reranker=reranker)
        return self._checkin

    def conversation(self, now: datetime | str | None = None) -> Conversation:
        """A new request and its follow-up answers, for callers that keep several at once (one per chat)."""
        return self.checkin.conversation(now=now)

    def select(self, text: str, now: datetime | str | None = None) -> CheckInResult:
        """Pick the checkpoint TEXT means: action "select", "clarify" (answer with `answer`) or "no_match"."""
        if not text or not text.strip():
            raise ValueError("the request is empty; say what you want to make, e.g. 'my cartoon bear at the beach'")
        self._conversation = self.conversation(now)
        return self._conversation.ask(text.strip())

    def answer(self, reply: str | int) -> CheckInResult:
        """Answer the open question of the last `select`: an option's index, or words."""
        last = self._conversation.last if self._conversation is not None else None
        if last is None or last.action != "clarify":
            raise ValueError("there is no open question; call select first")
        if isinstance(reply, int) and not isinstance(reply, bool):
            if not 0 <= reply < len(last.options):
                raise ValueError(f"option {reply} does not exist; choose 0 to {len(last.options) - 1}")
            return self._conversation.answer(last.options[reply])
        return self._conversation.answer(str(reply))

    # --- serving ----------------------------------------------------------------------------------

    @property
    def manager(self) -> PipelineManager:
        """The serving layer, loading the base model on first use (the Ray deployment when
        PERSONALQ_RAY_ADDRESS is set). Quantized variants are kept under HOME/quantized, in the folder
        serving derives from the store's home, so the app and the library share one cache."""
        with self._serving_lock:
            if self._manager is None:
                from personalq.cluster.client import renderer_for
                from personalq.serving import ServingConfig

                config = ServingConfig(base_model=str(self.settings.base_model),
                                       memory_budget_bytes=self.settings.memory_budget_bytes)
                self._manager = renderer_for(config, store=self.repo)
            return self._manager

    def generate(self, prompt: str, checkpoint_id: str | None = None, *, setting: str = "FP32", taq: bool = True,
                 steps: int = 20, guidance: float | None = None, seed: int = 0,
                 progress: Callable[[int, int, str], None] | None = None) -> GenerationResult:
        """One image of PROMPT with the checkpoint attached (none: the plain base) at SETTING."""
        from personalq.serving import GenerationRequest

        request = GenerationRequest(prompt, checkpoint_id=checkpoint_id, setting=setting, taq=taq, steps=steps,
                                    guidance=guidance, seed=seed)
        return self.manager.generate(request, progress=progress)

    def use_settings(self, settings) -> bool:
        """Take new settings: uploads are checked against the new base at once, a changed LLM rebuilds
        Check-in, a changed base model or budget reloads serving on the next `generate`. True when
        serving was dropped (a queue built on the old `manager` should be closed)."""
        with self._serving_lock:
            old = self.settings
            reload = (settings.base_model, settings.memory_budget_bytes) != (old.base_model, old.memory_budget_bytes)
            if reload:
                self._manager = None
            if settings.llm_model != old.llm_model and self._reranker is None:
                self._checkin = None
            self.repo.bases = dict(served_bases(settings.base_model))
            self.settings = settings
        return reload

    def close(self) -> None:
        self.repo.close()

    def __enter__(self) -> PersonalQ:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
