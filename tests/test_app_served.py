"""`python app.py` served on 127.0.0.1, driven in headless Chromium and through `gradio_client`.

The app runs as its own process against a small repository built here (tiny SD 1.5-layout base, real
LoRA files), so every step goes through the real store, Check-in and serving code. Both tests share the
one server (starting it and quantizing the tiny UNet are the slow parts) and each leaves the other's
checkpoints alone. The browser test saves a screenshot per step into docs/screenshots/ for the README.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from test_app_service import TINY_STEPS, app_assets  # noqa: F401  (the shared, session-built repository)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
WAIT_MS = 120_000  # a shared 2-core machine: Check-in's first call and the first image take seconds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_app(home: Path, base: Path, **env_extra: str):
    """`python app.py` on a free port of 127.0.0.1 over `home`; yields its URL and stops it afterwards."""
    port = _free_port()
    env = dict(os.environ, PERSONALQ_HOME=str(home), PERSONALQ_HOST="127.0.0.1", PORT=str(port),
               PERSONALQ_BASE_MODEL=str(base), PERSONALQ_STEPS=str(TINY_STEPS), **env_extra)
    log = (home.parent / f"{home.name}-server.log").open("w")
    server = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 180
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"app.py did not start: {Path(log.name).read_text()[-2000:]}")
            time.sleep(0.5)
    try:
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def served_copy(app_assets, tmp_path_factory, name: str = "served-home") -> Path:  # noqa: F811
    """A fresh data directory holding the test repository."""
    home = tmp_path_factory.mktemp(name)
    shutil.copytree(app_assets["home"], home, dirs_exist_ok=True)
    return home


@pytest.fixture(scope="module")
def app_url(app_assets, tmp_path_factory):  # noqa: F811
    """Start `python app.py` with a data directory that already holds the test repository."""
    with running_app(served_copy(app_assets, tmp_path_factory), app_assets["base"]) as url:
        yield url


def _shot(page, name: str) -> None:
    """A small PNG: the page at 1280 px wide, scaled to 960 and reduced to a 128-colour palette."""
    from PIL import Image

    SHOTS.mkdir(parents=True, exist_ok=True)
    image = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("RGB")
    image = image.resize((960, round(image.height * 960 / image.width)), Image.LANCZOS)
    image.quantize(colors=128).save(SHOTS / f"{name}.png", optimize=True)


def _textbox(page, elem_id: str):
    return page.locator(f"#{elem_id} textarea, #{elem_id} input").first


def _type_until_kept(box, text: str, tries: int = 5) -> None:
    """Type into a box, leave it, and type again until the value stays.

    Typed straight after the Settings tab opened, the box sometimes came back empty (1 fresh-clone run
    of the suite), and clicking Save straight after typing sometimes sent the old value ("Saved." for
    "a lot", 3 runs in 4): Gradio mounts a tab's components lazily and can reset a box it is still
    mounting. A person types later than that; the test must not race it either.
    """
    for _ in range(tries):
        box.fill(text)
        box.press("Tab")
        box.page.wait_for_timeout(300)
        if box.input_value() == text:
            return
    raise AssertionError(f"the box did not keep {text!r} in {tries} tries")


def _repository_ids(page, count: int | None = None) -> list[str]:
    """The ids the Repository tab lists; later calls name the `count` they expect, so a stale list never passes."""
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Repository").click()
    page.click("#repo-filter")
    status = page.locator("#repo-status")
    if count is None:  # the first listing: nothing stale is on screen yet
        expect(status).to_contain_text(re.compile(r"\d+ checkpoint\(s\)"))
        count = int(re.search(r"(\d+) checkpoint", status.inner_text()).group(1))
    captions = page.locator("#repo-gallery .caption-label")
    expect(captions).to_have_count(count)
    expect(status).to_contain_text(f"{count} checkpoint(s)")
    return sorted(c.split(" · ")[0] for c in captions.all_inner_texts())


@pytest.mark.browser
def test_chat_clarify_render_bitwidth_upload_and_refusal_in_chromium(app_url, app_assets):  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(WAIT_MS)
        expect.set_options(timeout=WAIT_MS)
        page.goto(app_url)

        # 1. A request that two checkpoints satisfy: the question and option cards with previews appear inline.
        _textbox(page, "message").fill("my bear in the park")
        page.click("#send")
        options = page.locator("#options button.thumbnail-item")
        expect(options).to_have_count(2)
        expect(page.locator("#chat")).to_contain_text("Do you want")
        expect(page.locator("#options img").first).to_be_visible()
        _shot(page, "1-clarify")

        # A second browser session has its own conversation: its request neither answers nor hides this question.
        other = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        other.goto(app_url)
        _textbox(other, "message").fill("my dog on the beach")
        other.click("#send")
        expect(_textbox(other, "prompt")).to_have_value("my <dog-v1> on the beach")
        expect(other.locator("#chat")).not_to_contain_text("Do you want")
        expect(options).to_have_count(2)
        expect(_textbox(page, "prompt")).to_have_value("")

        # 2. Clicking an option card selects that checkpoint, shows its card and renders a labelled image.
        options.filter(has_text="realistic").click()
        expect(page.locator("#chat")).to_contain_text("bear-v2")
        expect(_textbox(page, "prompt")).to_have_value("my <bear-v2> in the park")
        renders = page.locator("#chat div:has(> label:has-text('MiB resident')) img")
        expect(renders).to_have_count(1)
        expect(page.locator("#chat")).to_contain_text("Rendered: FP32 · ")
        expect(page.locator("#options")).to_be_hidden()
        _shot(page, "2-selected-and-rendered")

        # 3. Another bit-width re-renders the same prompt: a second image, labelled with the new setting.
        page.locator("#bitwidth label", has_text="W8A8").click()
        expect(renders).to_have_count(2)
        expect(page.locator("#chat")).to_contain_text("Rendered: W8A8 + TAQ · ")
        expect(page.locator("#chat")).to_contain_text("MiB resident")
        _shot(page, "3-bitwidth-compare")

        before = _repository_ids(page)
        assert {"bear-v1", "bear-v2", "dog-v1"} <= set(before) and "cat-v1" not in before

        # 4. Upload a checkpoint built in the test: the form is prefilled from its header, edited, saved.
        page.get_by_role("tab", name="Upload").click()
        expect(page.locator("#upload-file")).to_contain_text("MiB")  # the size limit is shown
        page.set_input_files("#upload-file input[type=file]", str(app_assets["cat"]))
        expect(_textbox(page, "form-triggers")).to_have_value("<cat-v1>")
        expect(_textbox(page, "form-description")).to_have_value("A black cat sitting on a windowsill, drawn as a pencil sketch.")
        page.set_input_files("#upload-previews input[type=file]", str(app_assets["cat_preview"]))
        expect(page.locator("#upload-previews")).to_contain_text("cat-v1.png")
        for field, value in {"subject_types": "cat", "style_tags": "sketch", "category": "cat", "version": "1"}.items():
            _textbox(page, f"form-{field}").fill(value)
        page.click("#upload-save")
        expect(page.locator("#upload-status")).to_contain_text("Added cat-v1")
        expect(_textbox(page, "form-triggers")).to_have_value("")  # the form is cleared for the next one
        _shot(page, "4-upload")

        # 5. It is in the repository at once, with its detail view.
        with_cat = _repository_ids(page, len(before) + 1)
        assert with_cat == sorted([*before, "cat-v1"])
        page.locator("#repo-gallery button.thumbnail-item", has_text="cat-v1").click()
        expect(page.locator("#repo-detail")).to_contain_text("pencil sketch")
        expect(page.locator("#repo-timeline")).to_contain_text("cat-v1")
        _shot(page, "5-repository")

        # 6. The next chat message can select it.
        page.get_by_role("tab", name="Chat").click()
        _textbox(page, "message").fill("a sketch of my cat")
        page.click("#send")
        expect(_textbox(page, "prompt")).to_have_value("a sketch of my <cat-v1>")
        expect(renders).to_have_count(3)
        expect(page.locator("#chat")).to_contain_text("cat-v1")
        _shot(page, "6-uploaded-selected")

        # 7. A truncated file: the store's refusal shows, and the repository is exactly as it was.
        page.get_by_role("tab", name="Upload").click()
        page.set_input_files("#upload-file input[type=file]", str(app_assets["broken"]))
        expect(page.locator("#upload-status")).to_contain_text("corrupt or truncated")
        _textbox(page, "form-id").fill("broken")
        page.click("#upload-save")
        expect(page.locator("#upload-status")).to_contain_text("Refused: broken.safetensors: corrupt or truncated")
        _shot(page, "7-bad-upload-refused")
        assert _repository_ids(page, len(with_cat)) == with_cat

        # 8. Removing asks first; "Keep it" keeps it, "Yes, remove it" removes it.
        page.locator("#repo-gallery button.thumbnail-item", has_text="cat-v1").click()
        page.click("#repo-remove")
        expect(page.locator("#repo-cancel")).to_be_visible()
        page.click("#repo-cancel")
        expect(page.locator("#repo-confirm")).to_be_hidden()
        assert _repository_ids(page, len(with_cat)) == with_cat
        page.locator("#repo-gallery button.thumbnail-item", has_text="cat-v1").click()
        page.click("#repo-remove")
        page.click("#repo-confirm")
        expect(page.locator("#repo-status")).to_contain_text("Removed cat-v1.")
        assert _repository_ids(page, len(before)) == before

        # 9. Settings: a bad value is refused in one line, a good one is saved.
        page.get_by_role("tab", name="Settings").click()
        budget = _textbox(page, "settings-budget")
        expect(page.locator("#settings-save")).to_be_visible()
        _type_until_kept(budget, "a lot")
        page.click("#settings-save")
        expect(page.locator("#settings-status")).to_contain_text("memory_budget_mb must be a number")
        _type_until_kept(budget, "")
        page.click("#settings-save")
        expect(page.locator("#settings-status")).to_contain_text("Saved.")
        browser.close()


def test_each_named_endpoint_through_gradio_client(app_url, app_assets):  # noqa: F811
    """The endpoints API scripts use: select, answer, generate, upload; each client is its own session."""
    from gradio_client import Client, handle_file
    from gradio_client.exceptions import AppError
    from PIL import Image

    client = Client(app_url, verbose=False)
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert {"/select", "/answer", "/generate", "/upload"} <= set(api)

    asked = client.predict("my bear in the park", api_name="/select")
    assert asked["action"] == "clarify" and len(asked["options"]) == 2
    assert "bear-v" not in asked["message"]

    # Another client is another session: it has no open question to answer.
    with pytest.raises(AppError, match="no open question"):
        Client(app_url, verbose=False).predict(option=0, api_name="/answer")

    realistic = next(i for i, o in enumerate(asked["options"]) if o["checkpoint_ids"] == ["bear-v2"])
    chosen = client.predict(option=realistic, api_name="/answer")
    assert (chosen["action"], chosen["checkpoint_id"], chosen["prompt"]) == ("select", "bear-v2", "my <bear-v2> in the park")

    image_path, info = client.predict(prompt=chosen["prompt"], checkpoint_id="bear-v2", setting="W8A8", taq=True,
                                      steps=TINY_STEPS, guidance=None, seed=3, api_name="/generate")
    assert Image.open(image_path).size == (32, 32)
    assert info["setting"] == "W8A8" and info["checkpoint_id"] == "bear-v2" and info["seed"] == 3
    assert info["label"].startswith("W8A8 + TAQ · ") and info["resident_bytes"] > 0

    card = client.predict(checkpoint=handle_file(str(app_assets["horse"])), previews=[],
                          metadata={"subject_types": "horse", "category": "horse", "style_tags": "realistic"},
                          api_name="/upload")
    assert card == {"id": "horse-v1", "trigger": "<horse-v1>", "version": None, "category": "horse"}
    assert client.predict("my horse", api_name="/select")["checkpoint_id"] == "horse-v1"

    with pytest.raises(AppError, match="corrupt or truncated"):
        client.predict(checkpoint=handle_file(str(app_assets["broken"])), previews=[], metadata={"id": "broken"},
                       api_name="/upload")
    with pytest.raises(AppError, match="unknown bit-width"):
        client.predict(prompt="a <horse-v1>", checkpoint_id="horse-v1", setting="W3A3", taq=True, steps=1, guidance=None,
                       seed=0, api_name="/generate")
    assert client.predict("my bear at the beach", api_name="/select")["action"] == "no_match"
