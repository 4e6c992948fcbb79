"""Both layouts of a Qdrant server as one type, for the code that builds either one.

`QdrantServerBackend` (tenants.py, the shared layout) and `QdrantCollectionsBackend`
(namespace_collections.py, a collection per namespace) take the same settings and
compose the same connection part (connection_owner.py); `plugin/backends.py` builds
either from the settings, migrate-layout both over one connection.
"""

from __future__ import annotations

from typing import TypeAlias

from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend

QdrantServerLayout: TypeAlias = QdrantServerBackend | QdrantCollectionsBackend
