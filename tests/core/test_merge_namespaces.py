"""Namespace records asked of several parts of one store merge as one store answers.

An engine worker pool asks each worker for its namespaces, and a worker's client answers
from its copies and asks the worker for the rest (adapters/merge.py, `merge_namespaces`):
a part whose names are unreadable fails the lookup only when no part found one live.
"""

from __future__ import annotations

import pytest

from adapters.errors import BackendUnavailable
from adapters.errors import StorageDamaged
from adapters.merge import merge_namespaces
from adapters.values import NamespaceRecord
from tests.support.records import T0

A = NamespaceRecord("workspace:a", "workspace", T0)
B = NamespaceRecord("team:b", "team", T0)
DAMAGED = StorageDamaged("stored data unreadable: org:c", ("org:c",))


def test_the_parts_found_are_one_answer() -> None:
    assert merge_namespaces([{A.name: A}, {}, {B.name: B}]) == {A.name: A, B.name: B}


def test_an_unreadable_part_is_left_out_while_another_found_one() -> None:
    assert merge_namespaces([DAMAGED, {A.name: A}]) == {A.name: A}


def test_an_unreadable_part_fails_the_lookup_when_none_is_live() -> None:
    other = StorageDamaged("stored data unreadable: org:d", ("org:d",))
    with pytest.raises(StorageDamaged) as raised:
        merge_namespaces([{}, DAMAGED, other])
    assert raised.value is DAMAGED  # the first part's


def test_any_other_failure_fails_the_lookup() -> None:
    down = BackendUnavailable("the engine worker is not running")
    with pytest.raises(BackendUnavailable):
        merge_namespaces([{A.name: A}, down])


def test_nothing_found_anywhere_is_an_empty_answer() -> None:
    assert merge_namespaces([{}, {}]) == {}
