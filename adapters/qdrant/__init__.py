"""Qdrant, embedded (qdrant-edge) or a server (qdrant-client), in one payload layout.

- `layout.py`, `filters.py`, `names.py`, `ranking.py`: what every Qdrant backend shares.
- `edge/`: the embedded default (`edge/edge_backend.py`, one module per concern).
- `server/`: a Qdrant server: `server/tenants.py`, every namespace a tenant of one
  collection (the default), or `server/namespace_collections.py`, one collection
  per namespace (opt-in); `server/connection.py` is what both share.
"""
