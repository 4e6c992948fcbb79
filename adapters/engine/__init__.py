"""The embedded store, qdrant-edge on disk (`edge_backend.py`), in an engine worker process
(`engine_worker.py`); the server names it only by its registry name (adapters/registry.py)."""
