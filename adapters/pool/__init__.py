"""The server's side of the embedded store: its engine worker processes behind the backend
interface (`engine_pool.py`), and how the store is placed among them at start-up.

Runs in the server process and never imports the engine (adapters/engine/). See
docs/backends.md, "The engine worker process".
"""
