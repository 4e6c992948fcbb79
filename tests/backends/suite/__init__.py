"""The backend test suite: the same calls against every `VectorBackend`.

Each backend's test module subclasses `BackendSuite` and provides a `backend`
fixture (fsspec's abstract-test pattern). The suite is one module per operation
group, each a class of its own:

- namespaces.py: namespace records, the store's metadata
- commit.py: writing and deleting memories
- search.py: queries and listings
- forget.py: expiry
- export.py: `iter_memories`
- hybrid.py: hybrid and keyword search, and the keyword index (backends that have them)
- rerank.py: the rerank stage and the token index (backends that keep token vectors)
- write_order.py: each memory's place in its namespace's write order

Records and vectors come from tests/support/records.py.
"""

from __future__ import annotations

from tests.backends.suite.commit import CommitSuite
from tests.backends.suite.export import ExportSuite
from tests.backends.suite.forget import ForgetSuite
from tests.backends.suite.namespaces import NamespaceSuite
from tests.backends.suite.search import SearchSuite
from tests.backends.suite.write_order import WriteOrderSuite


class BackendSuite(
    NamespaceSuite, CommitSuite, SearchSuite, ForgetSuite, ExportSuite, WriteOrderSuite
):
    """Behaviour every backend must share. Subclasses provide `backend`."""


__all__ = ["BackendSuite"]
