"""Server-wide changes can be locked (issue 21 item 11): admin token, uploads off, per-session chat.

Service-level tests cover every guarded action (upload, settings, removal) with no, a wrong and the
right token, and with uploads off; an HTTP test runs `python app.py` with PERSONALQ_ADMIN_TOKEN set and
drives the named /upload endpoint through gradio_client. A refusal leaves the store and settings as
they were.
"""

from __future__ import annotations

import shutil

import pytest

from test_app_service import TINY_STEPS, app_assets  # noqa: F401

TOKEN = "s3cret-admin-token"


@pytest.fixture
def locked_service(app_assets, personalq_home, monkeypatch):  # noqa: F811
    from personalq.service import PersonalQService
    from personalq.service.access import AccessPolicy

    def build(**policy):
        monkeypatch.setenv("PERSONALQ_BASE_MODEL", str(app_assets["base"]))
        monkeypatch.setenv("PERSONALQ_STEPS", str(TINY_STEPS))
        shutil.copytree(app_assets["home"], personalq_home, dirs_exist_ok=True)
        return PersonalQService(home=personalq_home, demo_repo=None, access=AccessPolicy(**policy))

    return build


def _snapshot(service):
    return sorted(c.id for c in service.store.cards()), service.settings, (service.home / "settings.json").exists()


@pytest.mark.parametrize("token", [None, "", "wrong", TOKEN + "x"])
def test_without_the_admin_token_no_upload_removal_or_settings_change(locked_service, app_assets, token):  # noqa: F811
    from personalq.service import AppError

    service = locked_service(admin_token=TOKEN)
    before = _snapshot(service)
    with pytest.raises(AppError, match="^uploading needs the admin token on this server$"):
        service.upload(app_assets["cat"], {"category": "cat"}, token=token)
    with pytest.raises(AppError, match="^removing a checkpoint needs the admin token"):
        service.remove("dog-v1", token=token)
    with pytest.raises(AppError, match="^changing settings needs the admin token"):
        service.save_settings(token=token, steps=7)
    assert _snapshot(service) == before
    # Chat is not server-wide: any visitor may still ask, in their own session.
    assert service.select("visitor", "my dog on the beach").card.id == "dog-v1"
    service.close()


def test_the_admin_token_allows_each_change(locked_service, app_assets):  # noqa: F811
    service = locked_service(admin_token=TOKEN)
    assert service.upload(app_assets["cat"], {"category": "cat"}, token=f" {TOKEN} ").id == "cat-v1"
    service.remove("dog-v1", token=TOKEN)
    assert service.save_settings(token=TOKEN, steps=7).steps == 7
    assert sorted(c.id for c in service.store.cards()) == ["bear-v1", "bear-v2", "cat-v1"]
    service.close()


def test_uploads_off_refuses_even_the_admin_and_reads_no_header(locked_service, app_assets):  # noqa: F811
    from personalq.service import AppError

    service = locked_service(admin_token=TOKEN, uploads_enabled=False)
    before = _snapshot(service)
    for attempt in (lambda: service.upload(app_assets["cat"], {}, token=TOKEN), lambda: service.upload_form(app_assets["cat"])):
        with pytest.raises(AppError, match="^uploads are turned off on this server$"):
            attempt()
    assert _snapshot(service) == before
    service.close()


def test_policy_comes_from_the_environment(monkeypatch):
    from personalq.service.access import AccessPolicy

    monkeypatch.delenv("PERSONALQ_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("PERSONALQ_UPLOADS", raising=False)
    assert AccessPolicy.from_env() == AccessPolicy(None, True)
    monkeypatch.setenv("PERSONALQ_ADMIN_TOKEN", TOKEN)
    monkeypatch.setenv("PERSONALQ_UPLOADS", "off")
    assert AccessPolicy.from_env() == AccessPolicy(TOKEN, False)


@pytest.mark.slow
def test_the_upload_endpoint_of_a_locked_server_needs_the_token(app_assets, tmp_path_factory):  # noqa: F811
    from gradio_client import Client, handle_file
    from gradio_client.exceptions import AppError

    from test_app_served import running_app, served_copy

    home = served_copy(app_assets, tmp_path_factory, "locked-home")
    with running_app(home, app_assets["base"], PERSONALQ_ADMIN_TOKEN=TOKEN) as url:
        client = Client(url, verbose=False)
        for token in ("", "wrong"):
            with pytest.raises(AppError, match="uploading needs the admin token"):
                client.predict(checkpoint=handle_file(str(app_assets["horse"])), previews=[], metadata={}, token=token,
                               api_name="/upload")
        card = client.predict(checkpoint=handle_file(str(app_assets["horse"])), previews=[],
                              metadata={"category": "horse"}, token=TOKEN, api_name="/upload")
        assert card["id"] == "horse-v1"
