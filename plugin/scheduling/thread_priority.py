"""The model's threads give way to the event loop and the engine when cores are short: a
thread preempted while it holds the GIL stalls every request, and the model's threads hold
none while they compute, so they run at a lower priority (Linux only; docs/behaviour.md)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

# Added to the nice value of the thread that calls `lower_this_thread` (the kernel caps it at 19).
MODEL_NICE_INCREMENT = 10


def lower_this_thread() -> None:
    """Give the calling thread (and the threads it starts later) a lower CPU priority."""
    if sys.platform != "linux":
        return
    tid = threading.get_native_id()
    try:  # on Linux, PRIO_PROCESS with a thread id sets that one thread's nice value
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + MODEL_NICE_INCREMENT))
    except OSError as error:
        log.debug("model thread keeps its priority: %s", error)


def low_priority_pool(workers: int, name: str) -> ThreadPoolExecutor:
    """A thread pool whose threads run at the model's lower priority."""
    return ThreadPoolExecutor(workers, thread_name_prefix=name, initializer=lower_this_thread)


async def at_low_priority(func: Callable[..., T], *args: Any) -> T:
    """`func(*args)` on a thread of its own at the lower priority (its threads inherit it)."""
    with low_priority_pool(1, "model-load") as pool:
        return await asyncio.get_running_loop().run_in_executor(pool, func, *args)
