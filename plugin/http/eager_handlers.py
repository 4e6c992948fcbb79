"""A request's handler starts in the loop iteration its request is read in, on Python 3.11.

aiohttp runs each request's handler in a task of its own (to copy the context);
on Python 3.12 and later it starts that task eagerly (`eager_start=True`), so the
handler runs at once, in the iteration that took the request from the connection.
On 3.11 (the image, CI) the task waits for the next iteration. Under a flood every
iteration holds an engine call of several milliseconds (adapters/qdrant/edge/turns.py),
and a refusal (429, plugin/scheduling/admission.py) was answered only in the third
iteration after its bytes arrived, behind three of them (benchmarks/README.md,
"Seventh slice").

So on 3.11 the app installs a task factory that starts aiohttp's request-handler
tasks eagerly, as 3.12 does: the task's first step runs inside `create_task`, as
that task (the caller's task set aside meanwhile, as 3.12's eager start does), in
the task's own copy of the context; the step the task scheduled for itself then
does nothing. Every other task is created as before. On 3.12 and later nothing is
installed. It leans on the pure-Python `Task` of 3.11's asyncio (its private step),
which is why it is confined to that version and to one kind of task.
"""

from __future__ import annotations

import asyncio
import sys
from asyncio import tasks
from collections.abc import AsyncIterator, Coroutine
from contextvars import Context
from typing import Any

from aiohttp import web

# The coroutine aiohttp's connection runs each request's handler in.
HANDLER_TASK = "RequestHandler._handle_request"
EAGER_START_BUILTIN = sys.version_info >= (3, 12)


class EagerTask(tasks._PyTask):  # type: ignore[name-defined,misc]
    """A task whose first step runs when it is created (3.12's `eager_start`)."""

    def __init__(
        self,
        coro: Coroutine[Any, Any, Any],
        *,
        loop: asyncio.AbstractEventLoop,
        context: Context | None = None,
    ) -> None:
        self._scheduled_first_step = True  # the step `__init__` schedules: already run
        super().__init__(coro, loop=loop, context=context)
        caller = tasks.current_task(loop)
        if caller is not None:
            tasks._leave_task(loop, caller)
        try:
            self._context.run(super()._Task__step)
        finally:
            if caller is not None:
                tasks._enter_task(loop, caller)

    def _Task__step(self, exc: BaseException | None = None) -> None:
        if self._scheduled_first_step:
            self._scheduled_first_step = False
            return
        super()._Task__step(exc)


def task_factory(
    loop: asyncio.AbstractEventLoop, coro: Any, context: Context | None = None
) -> asyncio.Task[Any]:
    """Request handlers start eagerly; every other coroutine gets a plain task."""
    code = getattr(coro, "cr_code", None)
    if code is not None and code.co_qualname == HANDLER_TASK:
        task: asyncio.Task[Any] = EagerTask(coro, loop=loop, context=context)
        return task
    return asyncio.Task(coro, loop=loop, context=context)


async def eager_handlers(app: web.Application) -> AsyncIterator[None]:
    """`cleanup_ctx`: the factory on the serving loop while the app runs (3.11 only)."""
    loop = asyncio.get_running_loop()
    before = loop.get_task_factory()
    install = not EAGER_START_BUILTIN and before is None
    if install:
        loop.set_task_factory(task_factory)
    yield
    if install and loop.get_task_factory() is task_factory:
        loop.set_task_factory(None)
