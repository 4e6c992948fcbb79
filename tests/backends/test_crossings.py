"""Every call of the backend interface is declared once (adapters/crossings.py); the pool's
typed methods are written from the declarations (adapters/pool/engine_stub.py), and its router
reads them alone."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from adapters.crossings import INTERFACES
from adapters.crossings import WORKER_CALLS
from adapters.crossings import Call
from adapters.crossings import NotSent
from adapters.crossings import WorkerCall
from adapters.crossings import split
from adapters.parts import PARTS
from adapters.pool.engine_pool import EnginePool
from adapters.pool.engine_stub import EngineStub
from adapters.values import VectorKind

ROOT = Path(__file__).resolve().parents[2]


def interface_calls() -> set[str]:
    """The calls a backend answers: the coroutines of `VectorBackend`, and every method of
    each part's protocol, as "method" or "part.method"."""
    found = set()
    for part, interface in INTERFACES.items():
        for name, member in vars(interface).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            if part is None and not inspect.iscoroutinefunction(member):
                continue  # `condition`: no I/O, answered by each side itself
            found.add(name if part is None else f"{part}.{name}")
    return found


def undeclared(declared: Mapping[str, WorkerCall]) -> set[str]:
    return interface_calls() - set(declared)


def test_every_call_of_the_interface_is_declared_and_nothing_else() -> None:
    assert undeclared(WORKER_CALLS) == set()
    assert set(WORKER_CALLS) - interface_calls() == set()
    assert set(INTERFACES) - {None} == set(PARTS)


def test_a_call_whose_declaration_is_deleted_is_found() -> None:
    less = {key: crossing for key, crossing in WORKER_CALLS.items() if key != "query_memories"}
    assert undeclared(less) == {"query_memories"}
    less = {k: c for k, c in WORKER_CALLS.items() if k != "transfer.upsert_memories"}
    assert undeclared(less) == {"transfer.upsert_memories"}


def test_the_stub_is_written_from_the_declarations_as_they_are() -> None:
    """adapters/pool/engine_stub.py is what scripts/generate-engine-stub writes today."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate-engine-stub"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "")


def test_the_stub_has_a_method_for_each_call_that_crosses() -> None:
    crossing = {key for key, c in WORKER_CALLS.items() if not isinstance(c.route, NotSent)}
    for key in crossing:
        part, name = split(key)
        holder = EngineStub if part is None else type(getattr(EnginePool, part).func(None))
        assert name in vars(holder), key


def test_the_pool_writes_only_its_own_calls() -> None:
    """Lifecycle, the ping with each worker's condition, the record copy and the upserts;
    every other call is the stub's, and the pool is not abstract."""
    own = {"start", "close", "ping", "upsert_memory", "upsert_batch", *_record_copy()}
    assert not inspect.isabstract(EnginePool)
    assert {name for name in vars(EnginePool) if name in WORKER_CALLS} == own


def _record_copy() -> set[str]:
    return {"get_namespace", "get_namespaces", "save_namespace", "delete_namespace"}


def test_a_call_reads_its_arguments_by_name_however_given() -> None:
    call = Call("query_memories", (["org:a"], "q"), {"memory_filter": "f", "limit": 5})
    assert [call.arg(name) for name in ("namespaces", "query", "memory_filter", "limit")] == [
        ["org:a"],
        "q",
        "f",
        5,
    ]
    moved = call.with_args(namespaces=["org:b"])
    assert moved.args == ()
    assert dict(moved.kwargs) == {
        "namespaces": ["org:b"],
        "query": "q",
        "memory_filter": "f",
        "limit": 5,
    }
    walk = Call("vector_fill.missing", (VectorKind.TOKENS, None, 10), {})
    assert (walk.part, walk.method, walk.arg("kind"), walk.arg("cursor")) == (
        "vector_fill",
        "missing",
        VectorKind.TOKENS,
        None,
    )
