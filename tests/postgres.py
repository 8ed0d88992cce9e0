"""A throwaway PostgreSQL server for tests of the ``postgres:`` DuckLake catalog.

It runs the machine's own server binaries (Debian's ``postgresql`` package; ``make test``
installs it) on a private data directory and port, as the ``postgres`` user when run as root,
because ``initdb`` refuses root.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def server_binaries() -> Path:
    initdb = shutil.which("initdb")
    if initdb:
        return Path(os.path.realpath(initdb)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError(
            "PostgreSQL's server binaries (initdb, pg_ctl) are missing: `make test` installs "
            "Debian's postgresql package"
        )
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server; yield the libpq DSN of its ``postgres`` database; stop and remove it."""
    binaries = server_binaries()
    # its own directory: the server user must reach it, and pytest's are private to root
    directory = Path(tempfile.mkdtemp(prefix="duckstream-pg-"))
    data = directory / "pgdata"
    data.mkdir()
    prefix: list[str] = []
    user = pwd.getpwuid(os.getuid()).pw_name
    if os.getuid() == 0:
        owner = pwd.getpwnam("postgres")
        for path in (directory, data):
            os.chown(path, owner.pw_uid, owner.pw_gid)
        prefix, user = ["runuser", "-u", "postgres", "--"], "postgres"
    port = free_port()

    def run(*args: str) -> None:
        done = subprocess.run([*prefix, *args], capture_output=True, text=True, cwd=directory)
        if done.returncode:
            raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr or done.stdout}")

    run(str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", user, "--no-sync")
    options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(data / "log"), "start")
    try:
        dsn = f"dbname=postgres host=127.0.0.1 port={port} user={user}"
        wait_until_ready(port)
        yield dsn
    finally:
        run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(directory, ignore_errors=True)


def wait_until_ready(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"PostgreSQL did not start on port {port}")


def create_database(dsn: str, name: str) -> str:
    """A new empty database on the server of ``dsn``; its DSN."""
    fields = dict(part.split("=", 1) for part in dsn.split())
    subprocess.run(
        [
            str(server_binaries() / "createdb"),
            "-h",
            fields["host"],
            "-p",
            fields["port"],
            "-U",
            fields["user"],
            name,
        ],
        check=True,
        capture_output=True,
    )
    return dsn.replace(f"dbname={fields['dbname']}", f"dbname={name}")
