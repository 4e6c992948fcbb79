"""Both layouts of a Qdrant server as one type, for the code that builds either one.

`QdrantServerBackend` (tenants.py) and `QdrantCollectionsBackend` (namespace_collections.py) take
the same settings and connection part; plugin/backends.py builds either, migrate-layout both.
"""

from __future__ import annotations

from typing import TypeAlias

from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend

QdrantServerLayout: TypeAlias = QdrantServerBackend | QdrantCollectionsBackend
