"""Request handlers start in the iteration their request is read in (plugin/http/eager_handlers.py).

Python 3.11 only (3.12's aiohttp starts them eagerly itself). Deterministic: what
ran inside `create_task` is recorded before it returns; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator

import pytest

from plugin.http.eager_handlers import EAGER_START_BUILTIN, task_factory
from tests.support.app import AppFactory, served
from tests.support.clocks import WallClock

only_311 = pytest.mark.skipif(EAGER_START_BUILTIN, reason="aiohttp starts handlers eagerly")
where = contextvars.ContextVar("where", default="caller")
Events = list[tuple[str, object]]


class RequestHandler:
    """Named as aiohttp's, so that the factory takes its coroutine for a request's handler."""

    async def _handle_request(self, events: Events, gate: asyncio.Future[None] | None) -> str:
        events.append(("first step", asyncio.current_task()))
        if gate is None:  # a refusal: answered without waiting for anything
            return "429"
        where.set("handler")
        await gate
        events.append(("resumed", asyncio.current_task()))
        return where.get()


@pytest.fixture
async def factory() -> AsyncIterator[asyncio.AbstractEventLoop]:
    loop = asyncio.get_running_loop()
    loop.set_task_factory(task_factory)
    yield loop
    loop.set_task_factory(None)


@only_311
async def test_a_handler_runs_its_first_step_inside_create_task_as_its_own_task(
    factory: asyncio.AbstractEventLoop,
) -> None:
    events: Events = []
    gate = factory.create_future()
    caller = asyncio.current_task()
    task = factory.create_task(RequestHandler()._handle_request(events, gate))
    assert events == [("first step", task)]  # before create_task returned
    assert asyncio.current_task() is caller  # the caller is the current task again
    assert where.get() == "caller"  # the handler ran in its own copy of the context
    gate.set_result(None)
    assert await task == "handler"
    assert events == [("first step", task), ("resumed", task)]


@only_311
async def test_a_handler_done_in_its_first_step_is_done_when_created(
    factory: asyncio.AbstractEventLoop,
) -> None:
    """A refusal: answered without waiting for anything."""
    events: Events = []
    task = factory.create_task(RequestHandler()._handle_request(events, None))
    assert task.done()
    assert task.result() == "429"
    assert events == [("first step", task)]
    await asyncio.sleep(0)  # the step it had scheduled for itself does nothing
    assert task.result() == "429"


@only_311
async def test_a_handler_cancelled_while_it_waits_is_cancelled(
    factory: asyncio.AbstractEventLoop,
) -> None:
    events: Events = []
    gate = factory.create_future()
    task = factory.create_task(RequestHandler()._handle_request(events, gate))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert gate.cancelled()
    assert events == [("first step", task)]


async def test_other_coroutines_start_in_a_later_iteration(
    factory: asyncio.AbstractEventLoop,
) -> None:
    events: Events = []

    async def background() -> None:
        events.append(("ran", asyncio.current_task()))

    task = factory.create_task(background())
    assert events == []
    await task
    assert events == [("ran", task)]
    assert type(task) is asyncio.Task


async def test_the_app_installs_the_factory_while_it_runs_on_311(
    make_app: AppFactory, clock: WallClock
) -> None:
    loop = asyncio.get_running_loop()
    async for api in served(make_app, clock):
        installed = loop.get_task_factory()
        assert installed is (None if EAGER_START_BUILTIN else task_factory)
        reply = await api.call("GET", "/v1/health")
        assert reply.status == 200
    assert loop.get_task_factory() is None
