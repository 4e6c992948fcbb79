"""A backend in a worker process of its own, behind the backend interface.

For a backend whose engine runs in-process and holds the GIL through its calls
(the embedded store, adapters/qdrant/edge/): the server's event loop must never
wait for it. The server holds an `EnginePool` (engine_pool.py) of one worker or
several, which forwards every call of the backend interface and its parts
(adapters/parts.py) as plain values (frames.py) to the child process
(engine_worker.py) that builds the backend and serves it; `EngineProcess`
(engine_process.py) starts, watches and restarts that process, and its
`EngineQueue` decides which tenant's read goes to it next. Nothing here knows
which backend it carries.
"""
