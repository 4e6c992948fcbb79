"""`import-postgres` against a real PostgreSQL server holding the built-in plugin's tables.

The server is started by the tests themselves (harness/postgres_server.py), the
tables are created from the contract's column list, and content is embedded
with the real model into the real embedded store.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb

from adapters.engine.edge_backend import QdrantEdgeBackend
from harness.postgres_server import fresh_database
from harness.postgres_server import running_server
from plugin.cli import main
from plugin.commands import export_import
from plugin.commands import import_postgres
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.settings import Settings

NOW = datetime.now(UTC)
T0 = datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=UTC)
_names = itertools.count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    with running_server() as dsn:
        yield dsn


@pytest.fixture
def database(postgres: str) -> str:
    return fresh_database(postgres, f"plugin{next(_names)}")


@pytest.fixture
def no_model_load(monkeypatch: pytest.MonkeyPatch, encoder: SentenceTransformerEncoder) -> None:
    """The session's loaded model instead of loading it again (10 s) per run."""
    monkeypatch.setattr(export_import, "load_encoder", lambda _: encoder)


def small_corpus(dsn: str) -> dict[str, tuple[object, ...]]:
    """Namespaces of every kind, one expired; memories live, expired, pinned, propagated."""
    future, past = NOW + timedelta(days=7), NOW - timedelta(hours=1)
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO memory_namespaces (name, kind, expires_at, metadata, created_at) VALUES"
            " ('workspace:a', 'workspace', NULL, %s, %s), ('team:b', 'team', %s, NULL, %s),"
            " ('org:c', 'org', NULL, NULL, %s), ('custom:d', 'custom', %s, NULL, %s)",
            (Jsonb({"owner": "ops"}), T0, past, T0, T0, future, T0),
        )
        rows = {
            "a1": ("workspace:a", "deploys happen on Tuesdays", "fact", "agent", None, None, True),
            "a2": ("workspace:a", "the user likes tabs", "summary", "user", future,
                   Jsonb({"to": ["team:b"], "n": 12345678901234567890}), False),
            "a3": ("workspace:a", "this one has expired", "fact", "agent", past, None, False),
            "a4": ("workspace:a", "the user likes tabs", "checkpoint", "runtime", None, None,
                   False),
            "b1": ("team:b", "in an expired namespace", "fact", "agent", None, None, False),
            "d1": ("custom:d", "custom namespace memory", "fact", "agent", None, None, False),
        }  # fmt: skip
        ids = {}
        for key, row in rows.items():
            found = conn.execute(
                "INSERT INTO memory_records (namespace, content, kind, source, expires_at,"
                " propagation, pin, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " RETURNING id::text",
                (*row, T0 + timedelta(minutes=len(ids))),
            ).fetchone()
            assert found is not None
            ids[key] = (found[0], *row)
    return ids


def test_dry_run_counts_per_kind_and_writes_nothing(
    database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    small_corpus(database)
    monkeypatch.setenv("MEMORY_PLUGIN_DATA_DIR", str(tmp_path / "data"))
    assert main(["import-postgres", database, "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in out[1:-1]}
    assert rows == {
        "custom": ["1", "1", "0/0"],
        "org": ["1", "0", "0/0"],
        "team": ["0", "0", "1/1"],
        "workspace": ["1", "3", "0/1"],
        "total": ["3", "4", "1/2"],
    }
    assert "nothing written" in out[-1]
    assert not (tmp_path / "data").exists()


def test_import_keeps_ids_and_times_skips_expired_and_is_idempotent(
    database: str, tmp_path: Path, no_model_load: None
) -> None:
    ids = small_corpus(database)
    settings = Settings(data_dir=tmp_path / "data")
    echoed: list[str] = []

    def run() -> int:
        echoed.clear()
        return asyncio.run(
            import_postgres.run(settings, database, sample=10, batch=2, seed=1, echo=echoed.append)
        )

    assert run() == 0, echoed
    assert "4 written (4 embedded)" in echoed[0], echoed
    assert echoed[-1].endswith("3 of 3 namespaces sampled, 4 memories compared, 0 mismatches: OK")
    assert run() == 0, echoed
    assert "0 written (0 embedded), 4 unchanged" in echoed[0], echoed
    assert "(0 written, 3 unchanged, 1 expired)" in echoed[0], echoed

    async def check() -> None:
        store = QdrantEdgeBackend(384, tmp_path / "data")
        await store.start()
        try:
            assert await store.get_namespace("team:b") is None
            workspace = await store.get_namespace("workspace:a")
            assert workspace is not None
            assert workspace.metadata == {"owner": "ops"}
            assert workspace.created_at == T0
            a2 = await store.get_memory("workspace:a", str(ids["a2"][0]))
            assert a2 is not None
            assert a2.created_at == T0 + timedelta(minutes=1)
            assert a2.propagation == {"to": ["team:b"], "n": 12345678901234567890}
            assert a2.expires_at is not None
            assert a2.kind == "summary"
            assert a2.source == "user"
            a1 = await store.get_memory("workspace:a", str(ids["a1"][0]))
            assert a1 is not None
            assert a1.pin is True
            assert a1.expires_at is None
            assert await store.get_memory("workspace:a", str(ids["a3"][0])) is None
        finally:
            await store.close()

    asyncio.run(check())


def test_parity_mismatch_exits_non_zero(
    database: str,
    tmp_path: Path,
    no_model_load: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    small_corpus(database)
    with psycopg.connect(database) as conn:  # a name this plugin refuses: never imported
        conn.execute(
            "INSERT INTO memory_namespaces (name, kind) VALUES ('Workspace:Bad', 'workspace')"
        )
        conn.execute(
            "INSERT INTO memory_records (namespace, content, kind, source)"
            " VALUES ('Workspace:Bad', 'lost', 'fact', 'agent')"
        )
    monkeypatch.setenv("MEMORY_PLUGIN_DATA_DIR", str(tmp_path / "data"))
    assert main(["import-postgres", database, "--verify-sample", "50"]) == 1
    out = capsys.readouterr().out
    assert "verify: MISMATCH Workspace:Bad: postgres 1, plugin 0; missing 1 ('lost')" in out
    assert "1 mismatches: FAILED" in out

    async def forget_one() -> int:
        store = QdrantEdgeBackend(384, tmp_path / "data")
        await store.start()
        try:
            listed = [
                m async for page in store.transfer.iter_memories("custom:d", NOW) for m, _ in page
            ]
            assert await store.delete_memory("custom:d", listed[0].id)
            lines: list[str] = []
            found = await import_postgres.verify_against(
                database, store, sample=10, seed=None, echo=lines.append
            )
            assert any("MISMATCH custom:d: postgres 1, plugin 0" in line for line in lines)
            return found
        finally:
            await store.close()

    assert asyncio.run(forget_one()) == 2  # the bad namespace, and the forgotten memory


@pytest.mark.slow
@pytest.mark.long
def test_thousands_of_rows_in_a_hundred_namespaces_with_parity_and_idempotence(
    database: str, tmp_path: Path, no_model_load: None
) -> None:
    """2,000 live rows across 100 live namespaces (and 5 expired), several batches each way:
    0 mismatches, a re-run a no-op. benchmarks.transfer runs 10,000 across 500 for its rate."""
    with psycopg.connect(database) as conn:
        conn.execute(
            "INSERT INTO memory_namespaces (name, kind, metadata, created_at, expires_at)"
            " SELECT (ARRAY['workspace','team','org','custom'])[1 + i %% 4] || ':ns-' || i,"
            "        (ARRAY['workspace','team','org','custom'])[1 + i %% 4],"
            "        jsonb_build_object('i', i), %(t0)s + i * interval '1 minute',"
            "        CASE WHEN i >= 100 THEN %(past)s END"
            " FROM generate_series(0, 104) AS i",
            {"t0": T0, "past": NOW - timedelta(days=1)},
        )
        conn.execute(
            "INSERT INTO memory_records (namespace, content, kind, source, pin, expires_at,"
            "                            propagation, created_at)"
            " SELECT n.name,"
            "        'note ' || j || ' of ' || n.name || ': '"
            "          || (ARRAY['deploys run on Tuesdays', 'tabs over spaces',"
            "                    'the database is restored nightly', 'standup at ten',"
            "                    'the release train leaves on Friday'])[1 + j %% 5],"
            "        (ARRAY['fact','summary','checkpoint'])[1 + j %% 3],"
            "        (ARRAY['agent','user','runtime'])[1 + j %% 3],"
            "        j %% 7 = 0,"
            "        CASE WHEN j = 20 THEN %(past)s WHEN j %% 4 = 0 THEN %(future)s END,"
            "        CASE WHEN j %% 5 = 0 THEN jsonb_build_object('depth', j) END,"
            "        n.created_at + j * interval '1 second'"
            " FROM memory_namespaces n, generate_series(0, 20) AS j",
            {"past": NOW - timedelta(hours=1), "future": NOW + timedelta(days=30)},
        )
        live = conn.execute(
            "SELECT count(*) FROM memory_records r JOIN memory_namespaces n"
            " ON n.name = r.namespace WHERE n.expires_at IS NULL AND"
            " (r.expires_at IS NULL OR r.expires_at > now())"
        ).fetchone()
    assert live == (2_000,)
    settings = Settings(data_dir=tmp_path / "data")
    echoed: list[str] = []

    def run() -> int:
        echoed.clear()
        coroutine = import_postgres.run(
            settings, database, sample=100, batch=256, seed=7, echo=echoed.append
        )
        return asyncio.run(coroutine)

    assert run() == 0, echoed
    assert "2000 written (2000 embedded)" in echoed[0], echoed
    assert "(100 written, 0 unchanged, 5 expired)" in echoed[0], echoed
    assert echoed[-1].endswith(
        "100 of 100 namespaces sampled, 2000 memories compared, 0 mismatches: OK"
    )
    assert run() == 0, echoed
    assert "0 written (0 embedded), 2000 unchanged" in echoed[0], echoed
    assert echoed[-1].endswith("0 mismatches: OK")
