"""The embedded store: qdrant-edge in-process, on disk (`edge_backend.py`)."""
