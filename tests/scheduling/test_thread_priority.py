"""The model's threads run at a lower CPU priority than the event loop (thread_priority.py)."""

from __future__ import annotations

import gc
import os
import sys
import threading

import pytest
from aiohttp import web

from plugin.embedding.embedder import BatchingEmbedder
from plugin.scheduling.thread_priority import MODEL_NICE_INCREMENT
from plugin.scheduling.thread_priority import at_low_priority
from tests.support.app import AppFactory
from tests.support.encoders import GatedEncoder

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def this_thread_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def lowered(base: int) -> int:
    if base >= 19:
        pytest.skip("this test already runs at the lowest priority: nothing can be lowered")
    return min(19, base + MODEL_NICE_INCREMENT)


class NiceRecordingEncoder(GatedEncoder):
    """Records the nice value of the thread each batch runs on."""

    def __init__(self) -> None:
        super().__init__(parallelism=2)
        self.nice: list[int] = []
        self.gate.set()

    def encode(self, texts: list[str]) -> list[list[float]]:
        self.nice.append(this_thread_nice())
        return super().encode(texts)


@linux_only
async def test_the_batchers_threads_run_below_the_event_loop() -> None:
    encoder = NiceRecordingEncoder()
    embedder = BatchingEmbedder(encoder, max_batch=4)
    expected = lowered(this_thread_nice())
    await embedder.start()
    try:
        await embedder.embed("a text")
    finally:
        await embedder.close()
    assert encoder.nice == [expected]


@linux_only
async def test_the_model_loads_on_a_lowered_thread_and_the_loop_keeps_its_priority() -> None:
    """ONNX Runtime's own threads start in the loading thread and inherit its priority."""
    base = this_thread_nice()
    expected = lowered(base)
    started_thread: list[int] = []

    def load() -> int:
        inner = threading.Thread(target=lambda: started_thread.append(this_thread_nice()))
        inner.start()
        inner.join()
        return this_thread_nice()

    assert await at_low_priority(load) == expected
    assert started_thread == [expected]
    assert this_thread_nice() == base


async def test_the_running_app_keeps_its_start_up_heap_out_of_full_collections(
    make_app: AppFactory,
) -> None:
    app = make_app()
    runner = web.AppRunner(app)
    assert gc.get_freeze_count() == 0
    await runner.setup()
    try:
        assert gc.get_freeze_count() > 0
    finally:
        await runner.cleanup()
    assert gc.get_freeze_count() == 0
