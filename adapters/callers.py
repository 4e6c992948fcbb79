"""Who a backend call is made for, so that a backend serialising its calls can take them
in turn, tenant by tenant, instead of first come, first served.

The plugin sets `current_caller` once per request, to the request's tenant
(plugin/scheduling/admission.py); as a context variable it follows the request's
task into every backend call it makes. A backend whose calls wait for one shared
resource (the embedded store's engine worker: qdrant/edge/engine_queue.py)
serves the callers waiting there in turn by it. None: nobody in particular
(start-up, the janitor, tools).
"""

from __future__ import annotations

from contextvars import ContextVar

current_caller: ContextVar[str | None] = ContextVar("current_caller", default=None)
