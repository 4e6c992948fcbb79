"""Qdrant, embedded (qdrant-edge) or a server (qdrant-client), in one payload layout.

- `layout.py`, `filters.py`, `names.py`: what every Qdrant layout shares.
- `edge.py` (+ `edge_records.py`, `edge_legacy.py`): the embedded default.
- `server.py`: a Qdrant server, every namespace a tenant of one collection.
- `server_collections.py`: a Qdrant server, one collection per namespace (opt-in).
- `server_records.py`: the shared server layout's namespace records and purges.
- `server_calls.py`, `migrate.py`: what the two server layouts share; moving between them.
"""
