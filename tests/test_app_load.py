"""Twenty people at once (issue 25): each `gradio_client.Client` is its own session that asks, answers the
question, and renders its checkpoint at two settings through /compare, all against one served app.

Bounded in time (a hang fails the test instead of stalling CI); every session must finish without an
error and with its own state: the checkpoint it chose, its own prompt and seed, never a neighbour's.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from test_app_served import running_app, served_copy
from test_app_service import app_assets  # noqa: F401

pytestmark = pytest.mark.slow

SESSIONS = 20
BOUND_S = 600  # a liveness bound for 40 one-step images of a 32x32 model on a busy 2-core machine, not a speed target


def _one_session(url: str, number: int) -> dict:
    from gradio_client import Client

    client = Client(url, verbose=False)
    asked = client.predict("my bear at night", api_name="/select")
    assert asked["action"] == "clarify", asked
    wanted = "bear-v2" if number % 2 else "bear-v1"
    option = next(i for i, o in enumerate(asked["options"]) if o["checkpoint_ids"] == [wanted])
    chosen = client.predict(option=option, api_name="/answer")
    prompt = f"<{wanted}> in the park, picture {number}"
    compared = client.predict(settings=["W8A8"], prompt=prompt, seed=1000 + number, steps=1, api_name="/compare")
    return {"number": number, "chosen": chosen["checkpoint_id"], "wanted": wanted, "prompt": prompt, "compared": compared}


def test_twenty_concurrent_sessions_each_finish_with_their_own_state(app_assets, tmp_path_factory):  # noqa: F811
    home = served_copy(app_assets, tmp_path_factory, "load-home")
    with running_app(home, app_assets["base"]) as url, ThreadPoolExecutor(SESSIONS) as pool:
        futures = [pool.submit(_one_session, url, number) for number in range(SESSIONS)]
        results = [future.result(timeout=BOUND_S) for future in futures]
    for result in results:
        assert result["chosen"] == result["wanted"]
        variants = result["compared"]["variants"]
        assert [v["setting"] for v in variants] == ["FP32", "W8A8"]
        assert {(v["checkpoint_id"], v["prompt"], v["seed"]) for v in variants} == {
            (result["wanted"], result["prompt"], 1000 + result["number"])}
        assert len(result["compared"]["differences"]) == 1
