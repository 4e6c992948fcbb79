"""The embedded store as an engine worker process runs it: qdrant-edge on disk
(`edge_backend.py`), served to the server over a socket (`engine_worker.py`).

Nothing outside this folder imports it but by the name the worker is started with
(adapters/registry.py).
"""
