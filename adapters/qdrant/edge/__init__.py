"""The embedded store: qdrant-edge in-process, on disk (`backend.py`)."""
