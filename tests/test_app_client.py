"""The app's named API endpoints (select, answer, generate, upload), called the way scripts do: gradio_client."""

from __future__ import annotations

import pytest

from test_app_browser import app_url  # noqa: F401  (starts `python app.py` on a free port)
from test_app_service import TINY_STEPS, app_assets  # noqa: F401

pytestmark = pytest.mark.slow


def test_each_named_endpoint_through_gradio_client(app_url, app_assets):  # noqa: F811
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

    card = client.predict(checkpoint=handle_file(str(app_assets["cat"])),
                          previews=[handle_file(str(app_assets["cat_preview"]))],
                          metadata={"subject_types": "cat", "category": "cat", "style_tags": "sketch"},
                          api_name="/upload")
    assert card == {"id": "cat-v1", "trigger": "<cat-v1>", "version": None, "category": "cat"}
    assert client.predict("my cat", api_name="/select")["checkpoint_id"] == "cat-v1"

    with pytest.raises(AppError, match="corrupt or truncated"):
        client.predict(checkpoint=handle_file(str(app_assets["broken"])), previews=[], metadata={"id": "broken"},
                       api_name="/upload")
    with pytest.raises(AppError, match="unknown bit-width"):
        client.predict(prompt="a <cat-v1>", checkpoint_id="cat-v1", setting="W3A3", taq=True, steps=1, guidance=None,
                       seed=0, api_name="/generate")
    assert client.predict("my bear at the beach", api_name="/select")["action"] == "no_match"
