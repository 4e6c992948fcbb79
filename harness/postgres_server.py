"""A throwaway PostgreSQL server for tests, and the built-in plugin's tables.

The server is Debian's `postgresql` package (`scripts/test` installs it):
`initdb` in a fresh temporary directory, listening on a unix socket there and
on no TCP address, durability switched off (a test database). initdb refuses
to run as root, so under root the server runs as the `postgres` user (or
`nobody`). Without the binaries a test is skipped locally, but fails under CI
(`CI=true`), where `scripts/test` must have installed them.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# The built-in plugin's tables, from ../shared/contract/POSTGRES-PLUGIN-SCHEMA.md. pgvector
# is not installed here: `embedding` is a nullable real[] (an importer ignores it anyway).
BUILTIN_PLUGIN_SCHEMA = """
CREATE TABLE memory_namespaces (
    name text PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('workspace', 'team', 'org', 'custom')),
    expires_at timestamptz,
    metadata jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE memory_records (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    namespace text NOT NULL REFERENCES memory_namespaces(name) ON DELETE CASCADE,
    content text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('fact', 'summary', 'checkpoint')),
    source text NOT NULL CHECK (source IN ('agent', 'runtime', 'user')),
    expires_at timestamptz,
    propagation jsonb,
    pin boolean NOT NULL DEFAULT false,
    embedding real[],
    content_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_records_namespace ON memory_records (namespace);
CREATE INDEX memory_records_tsv ON memory_records USING gin (content_tsv);
CREATE INDEX memory_records_expires_at ON memory_records (expires_at);
"""


def find_bindir() -> Path | None:
    """Where initdb and pg_ctl are: $PG_BINDIR, PATH, or Debian's newest version."""
    candidates = [os.environ.get("PG_BINDIR", "")]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += [str(path) for path in versions]
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    return None


def _unprivileged_user() -> str | None:
    """The account to run the server as when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("running as root and neither 'postgres' nor 'nobody' exists")


@contextmanager
def running_server() -> Iterator[str]:
    """Start a server in a temporary directory; yield a DSN of its `postgres` database."""
    bindir = find_bindir()
    if bindir is None:
        reason = "PostgreSQL server binaries (initdb, pg_ctl) not found; apt-get install postgresql"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason} (CI=true: scripts/test installs them)")
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="memory-plugin-pg-"))
    user = _unprivileged_user()
    prefix = ["runuser", "-u", user, "--"] if user else []
    if user:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data, log = root / "data", root / "server.log"

    def run(*command: str) -> None:
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--locale=C", "--no-sync")  # fmt: skip
        options = (
            f"-k {root} -c listen_addresses='' -p 5432 -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off"
        )
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w",
            "-t", "60", "start")  # fmt: skip
    except subprocess.CalledProcessError as error:
        details = error.stderr.decode(errors="replace")[-2000:]
        shown = log.read_text()[-2000:] if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL: {details}\n{shown}") from error
    try:
        yield f"host={root} port=5432 user=postgres dbname=postgres"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            check=False,
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(admin_dsn: str, name: str) -> str:
    """Create database `name` with the built-in plugin's tables; its DSN."""
    import psycopg

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = admin_dsn.replace("dbname=postgres", f"dbname={name}")
    with psycopg.connect(dsn) as conn:
        conn.execute(BUILTIN_PLUGIN_SCHEMA)
    return dsn
