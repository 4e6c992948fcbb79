"""A backend's request method answered by one of its parts (`AnsweredBy`, adapters/base.py) is
the part's own method: it must take what the interface's takes, by the same names."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from adapters.base import AnsweredBy
from adapters.base import VectorBackend
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from tests.support.records import DIM

URL = "http://qdrant.test:6333"  # never reached: nothing here is started


def built(kind: type[VectorBackend], tmp_path: Path) -> VectorBackend:
    if kind is QdrantEdgeBackend:
        return QdrantEdgeBackend(DIM, tmp_path)
    return kind(DIM, url=URL)


def handed(kind: type[VectorBackend]) -> list[str]:
    """The names `kind` or a base of it hands to a part."""
    return [n for n in dir(kind) if isinstance(inspect.getattr_static(kind, n), AnsweredBy)]


def mismatched(backend: VectorBackend) -> list[str]:
    """The handed calls of `backend` whose part's method is not the interface's."""
    wrong = []
    for name in handed(type(backend)):
        wanted = list(inspect.signature(getattr(VectorBackend, name)).parameters.values())[1:]
        method = getattr(backend, name)
        found = inspect.signature(method).parameters.values()
        same = [(p.name, p.kind) for p in found] == [(p.name, p.kind) for p in wanted]
        if not same or not inspect.iscoroutinefunction(method):
            wrong.append(name)
    return wrong


@pytest.mark.parametrize(
    ("kind", "count"),
    [(QdrantEdgeBackend, 13), (QdrantServerBackend, 5), (QdrantCollectionsBackend, 4)],
)
def test_each_call_handed_to_a_part_takes_the_interface_s_arguments(
    kind: type[VectorBackend], count: int, tmp_path: Path
) -> None:
    assert len(handed(kind)) == count
    assert mismatched(built(kind, tmp_path)) == []


def test_a_part_method_that_takes_other_arguments_is_found(tmp_path: Path) -> None:
    class Part:
        async def get_namespace(self, namespace: str) -> None: ...

        def save_namespace(self, record: object) -> None: ...

        async def delete_namespace(self, name: str) -> bool:
            return False

        async def list_namespaces(self) -> list[object]:
            return []

    backend = QdrantCollectionsBackend(DIM, url=URL)
    backend.records = Part()  # type: ignore[assignment]
    assert mismatched(backend) == ["get_namespace", "save_namespace"]
