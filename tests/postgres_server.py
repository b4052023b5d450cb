"""A throwaway PostgreSQL server for tests (a pytest plugin of ``tests/conftest.py``): Debian's
binaries, a fresh cluster in a temporary folder, listening on a free loopback port, one per
session (``postgres_server``), a fresh database per test (``postgres_url``).

``db_backend`` runs a test once on SQLite (the workspace's registry.sqlite) and once on
PostgreSQL (``WORKBENCH_DATABASE_URL`` names a fresh database): mark backend-agnostic tests
``@pytest.mark.usefixtures("db_backend")``.

initdb and pg_ctl refuse to run as root: as root the cluster belongs to the ``postgres`` account
(``runuser``). Without the binaries the fixture skips (fails under REQUIRE_POSTGRES_TESTS=1).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from estimator_workbench.store.registry_db import DATABASE_URL_ENV, dispose_engines

__all__ = ["PostgresServer", "db_backend", "find_bin_dir", "postgres_server", "postgres_url"]


def find_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding initdb, or initdb on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One cluster: ``start()``, ``new_database()`` -> a URL, ``restart()``, ``stop()``.

    Example:
        >>> server = PostgresServer(find_bin_dir()); server.start()   # doctest: +SKIP
        >>> server.new_database()                                      # doctest: +SKIP
        'postgresql://postgres@127.0.0.1:54321/t_...'
    """

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.port = _free_port()
        # not under pytest's temporary tree: it is private to root, and the server runs as postgres
        self.dir = Path(tempfile.mkdtemp(prefix="ewb-pg-", dir="/tmp" if os.path.isdir("/tmp") else None))
        self.data = self.dir / "data"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self._as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self._as_user, *args], capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def start(self) -> None:
        if not self.data.exists():
            self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres",
                      "--auth=trust", "-E", "UTF8", "--no-sync")
        # max_connections: 32 runners and a reader each hold a few pooled connections
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                   "-c max_connections=400 -c fsync=off")
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-w", "-l",
                  str(self.dir / "server.log"), "-o", options, "start")

    def stop(self) -> None:
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    def new_database(self) -> str:
        """A fresh empty database; returns its URL."""
        name = "t_" + uuid.uuid4().hex[:12]
        self._admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def cleanup(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL cluster for the whole session (started on first use, stopped and removed at
    the end)."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        reason = ("PostgreSQL's binaries (initdb, pg_ctl) are not installed: `apt-get install "
                  "postgresql`")
        if os.environ.get("REQUIRE_POSTGRES_TESTS") == "1":
            pytest.fail(reason + " (REQUIRE_POSTGRES_TESTS=1)")
        pytest.skip(reason)
    server = PostgresServer(bin_dir)
    server.start()
    try:
        yield server
    finally:
        dispose_engines()
        server.cleanup()


@pytest.fixture
def postgres_url(postgres_server):
    """The URL of a fresh, empty database on the session's server (dropped after the test)."""
    url = postgres_server.new_database()
    yield url
    dispose_engines()  # pooled connections would block DROP DATABASE
    postgres_server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_backend(request, monkeypatch):
    """The registry's database for this test: 'sqlite' or 'postgresql' (then
    ``$WORKBENCH_DATABASE_URL`` names a fresh database)."""
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    if request.param == "postgresql":
        monkeypatch.setenv(DATABASE_URL_ENV, request.getfixturevalue("postgres_url"))
    return request.param
