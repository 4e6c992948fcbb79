"""A backend in a worker process of its own, behind the backend interface.

For a backend whose engine holds the GIL through its calls, so the server's event loop never
waits for it. See docs/backends.md, "The engine worker process".
"""
