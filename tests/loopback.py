"""What the tests that start a server on this machine share: a free loopback port, a PostgreSQL server, a Chroma server.

Each server listens on 127.0.0.1 only, keeps its data in a fresh temporary folder, and is stopped (and
its folder removed) when its `with` block ends, whatever happened inside. Where the server's programs
are not installed, the starter skips the test that asked for it, with the reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SERVER_START_TIMEOUT_S = 60.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------ PostgreSQL


def _postgresql_program(name: str) -> str | None:
    """Debian keeps PostgreSQL's server programs off PATH, under /usr/lib/postgresql/<version>/bin."""
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return shutil.which(name) or (str(found[-1]) if found else None)


INITDB, PG_CTL, CREATEDB = (_postgresql_program(name) for name in ("initdb", "pg_ctl", "createdb"))
POSTGRESQL_MISSING = (None if INITDB and PG_CTL and CREATEDB
                      else "PostgreSQL's initdb/pg_ctl/createdb are not installed (Debian: postgresql)")


def _as_server_user(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root; run it as Debian's `postgres` user then."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextmanager
def postgresql_server() -> Iterator[str]:
    """A PostgreSQL server with one empty database, `catalog`; yields its SQLAlchemy URL (psycopg driver).

    initdb + pg_ctl in a temporary folder, trust authentication for user `pq`, loopback TCP and a
    private socket folder, fsync off (test data only).
    """
    if POSTGRESQL_MISSING:
        pytest.skip(POSTGRESQL_MISSING)
    root = Path(tempfile.mkdtemp(prefix="personalq-postgres-"))  # not under pytest's root-only folder: the server user must reach it
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        root.chmod(0o700)
    data, port = root / "data", free_port()

    def run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(_as_server_user(argv), check=True, capture_output=True, timeout=timeout)

    try:
        run([INITDB, "-D", str(data), "-A", "trust", "-U", "pq"], 120)
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"
        run([PG_CTL, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"], 120)
        try:
            run([CREATEDB, "-h", "127.0.0.1", "-p", str(port), "-U", "pq", "catalog"], 60)
            yield f"postgresql+psycopg://pq@127.0.0.1:{port}/catalog"
        finally:
            subprocess.run(_as_server_user([PG_CTL, "-D", str(data), "-m", "fast", "-w", "stop"]), capture_output=True, timeout=120)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ Chroma


CHROMA = shutil.which("chroma")


def _wait_for_heartbeat(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"chroma run exited with {server.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"chroma run did not answer within {SERVER_START_TIMEOUT_S:.0f} s: {log.read_text(errors='replace')[-2000:]}")


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=30)


@contextmanager
def chroma_server() -> Iterator[str]:
    """A `chroma run` server (telemetry off) on its own empty folder; yields its URL, as PERSONALQ_CHROMA_URL takes it."""
    if CHROMA is None:
        pytest.skip("chromadb's `chroma` command is not installed")
    root = Path(tempfile.mkdtemp(prefix="personalq-chroma-"))
    port = free_port()
    url, log = f"http://127.0.0.1:{port}", root / "server.log"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"}
    try:
        with log.open("wb") as out:
            server = subprocess.Popen([CHROMA, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(root / "db")],
                                      stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_for_heartbeat(url, server, log)
            yield url
        finally:
            _stop(server)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def chroma_collection(url: str, home: Path):
    """The collection of the store in `home`, as a separate client sees it on the Chroma server at `url`."""
    import chromadb
    from chromadb.config import Settings

    from personalq.store.indexes import server_address, server_collection_name

    host, port, ssl = server_address(url)
    client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=Settings(anonymized_telemetry=False))
    try:
        yield client.get_collection(server_collection_name(home / "chroma"))
    finally:
        client.close()
