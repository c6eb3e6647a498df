"""The dense index on a Chroma server, as `PERSONALQ_CHROMA_URL` names it for a cluster.

A real `chroma run` server is started on loopback by `loopback.chroma_server` and stopped when the
module ends; the store reaches it only through that variable. Checked: the vectors of an
import land on the server (and no embedded Chroma folder is written), search and Check-in answer
through it, a reopened store finds its collection again, and two stores (two homes) on one server
never see each other's vectors. Skipped where chromadb's `chroma` command is missing.
"""

from __future__ import annotations

import threading

import pytest

from demo_files import copy_demo
from loopback import chroma_collection, chroma_server, free_port

from personalq.store import RepoStore, StoreError
from personalq.store.indexes import SERVER_COLLECTION_FILE, server_address, server_collection_name

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chroma_url():
    with chroma_server() as url:
        yield url


@pytest.fixture
def on_server(chroma_url, monkeypatch):
    monkeypatch.setenv("PERSONALQ_CHROMA_URL", chroma_url)
    return chroma_url


def test_an_import_is_indexed_on_the_server_and_searched_through_it(on_server, tmp_path):
    from personalq.checkin import CheckIn

    home = tmp_path / "home"
    with RepoStore.open(home) as store:
        report = store.import_dir(copy_demo(tmp_path / "source", ["bag-v1", "bear-v1", "bridge-v1", "cat-v1"]))
        assert sorted(report.added) == ["bag-v1", "bear-v1", "bridge-v1", "cat-v1"]
        with chroma_collection(on_server, home) as collection:
            assert sorted(collection.get()["ids"]) == sorted(c.id for c in store.cards())
            assert store.dense_search("a green bag wearing a hat", 1)[0][0] == "bag-v1"
            assert store.dense_search("a bridge", 2, ids=["bear-v1", "bridge-v1"])[0][0] == "bridge-v1"
            assert CheckIn(store).ask("my green bag").checkpoint_id == "bag-v1"
            store.remove("cat-v1")
            assert collection.count() == 3
    assert sorted(p.name for p in (home / "chroma").iterdir()) == [SERVER_COLLECTION_FILE]  # no embedded Chroma files

    with RepoStore.open(home) as again:  # the collection is found again on the server: nothing to repair
        assert again.repair() == {"added": 0, "removed": 0, "recreated": 0}
        assert again.dense_search("a cartoon bear covered in spots", 1)[0][0] == "bear-v1"


def test_two_stores_on_one_server_do_not_see_each_others_vectors(on_server, tmp_path):
    with RepoStore.open(tmp_path / "alice") as alice, RepoStore.open(tmp_path / "bob") as bob:
        alice.import_dir(copy_demo(tmp_path / "a", ["bag-v1", "bear-v1"]))
        bob.import_dir(copy_demo(tmp_path / "b", ["bridge-v1"]))
        assert {i for i, _ in alice.dense_search("a bridge", 10)} == {"bag-v1", "bear-v1"}
        assert [i for i, _ in bob.dense_search("a green bag", 10)] == ["bridge-v1"]
        bob.reindex()  # clearing one store's collection leaves the other's alone
        assert {i for i, _ in alice.dense_search("a bridge", 10)} == {"bag-v1", "bear-v1"}
    names = {server_collection_name(tmp_path / home / "chroma") for home in ("alice", "bob")}
    assert len(names) == 2


def test_a_server_that_does_not_answer_is_a_one_line_refusal(monkeypatch, tmp_path):
    monkeypatch.setenv("PERSONALQ_CHROMA_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with pytest.raises(StoreError, match="the Chroma server at http://127.0.0.1:.* cannot be used") as refused:
        RepoStore.open(tmp_path / "home")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://127.0.0.1:8000", "http://127.0.0.1:99999", "http://:8000",
                                 "http://127.0.0.1:8000/some/path", "http://127.0.0.1:8000?tenant=x"])
def test_a_malformed_server_url_is_refused_before_anything_is_written(url, monkeypatch, tmp_path):
    with pytest.raises(StoreError, match="PERSONALQ_CHROMA_URL"):
        server_address(url)
    monkeypatch.setenv("PERSONALQ_CHROMA_URL", url)
    with pytest.raises(StoreError, match="PERSONALQ_CHROMA_URL"):
        RepoStore.open(tmp_path / "home")
    assert not (tmp_path / "home" / "chroma").exists()


def test_nodes_creating_the_collection_name_at_once_agree_on_one(tmp_path):
    names: list[str] = []
    start = threading.Barrier(8)

    def name() -> None:
        start.wait()
        names.append(server_collection_name(tmp_path / "chroma"))

    threads = [threading.Thread(target=name) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(names)) == 1 and names[0].startswith("personalq-")
    assert sorted(p.name for p in (tmp_path / "chroma").iterdir()) == [SERVER_COLLECTION_FILE]  # no drafts left


def test_an_unreadable_name_file_gives_a_new_valid_name(tmp_path):
    (tmp_path / "chroma").mkdir()
    (tmp_path / "chroma" / SERVER_COLLECTION_FILE).write_text("../../other store\n")
    name = server_collection_name(tmp_path / "chroma")
    assert name.startswith("personalq-") and name == server_collection_name(tmp_path / "chroma")


def test_without_the_variable_the_store_keeps_its_embedded_chroma_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("PERSONALQ_CHROMA_URL", raising=False)
    with RepoStore.open(tmp_path / "home") as store:
        store.import_dir(copy_demo(tmp_path / "source", ["bag-v1"]))
        assert store.dense_search("a green bag", 1)[0][0] == "bag-v1"
    files = {p.name for p in (tmp_path / "home" / "chroma").iterdir()}
    assert "chroma.sqlite3" in files and SERVER_COLLECTION_FILE not in files
