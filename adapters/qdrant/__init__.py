"""Qdrant, embedded (qdrant-edge) or a server (qdrant-client), in one payload layout.

`layout.py`, `filters.py`, `names.py` and `ranking.py` are what every Qdrant backend shares;
`edge/` holds the embedded default, `server/` the two layouts of a Qdrant server.
"""
