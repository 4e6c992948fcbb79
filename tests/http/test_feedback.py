"""Keyword feedback through the whole app with the real model (docs/backends.md, "Keyword
feedback"): a memory that shares no word with the question, but shares the answer's
words with the memories that match it best, is found by `feedback` and not by `hybrid`.
"""

from __future__ import annotations

import pytest

from harness.clocks import WallClock
from plugin.core import neighbours
from tests.support.app import AppFactory
from tests.support.app import ContractClient
from tests.support.app import served
from tests.support.helpdesk import ANSWER
from tests.support.helpdesk import NAMED
from tests.support.helpdesk import NS
from tests.support.helpdesk import OTHERS
from tests.support.helpdesk import QUESTION


async def _found(make_app: AppFactory, clock: WallClock, mode: str, seed: bool) -> list[str]:
    """The contents a search finds, best first; both apps open the same data dir."""
    found: list[str] = []
    async for api in served(make_app, clock, search=mode):
        if seed:
            await _seeded(api)
        reply = await api.search(NS, query=QUESTION, limit=20)
        assert reply.status == 200
        found = [m["content"] for m in reply.body["memories"]]
    return found


async def _seeded(api: ContractClient) -> None:
    assert (await api.put_ns(NS)).status == 200
    for content in [*NAMED, ANSWER, *OTHERS]:
        assert (await api.commit(NS, content)).status == 201


async def test_feedback_finds_the_answer_in_the_top_results_words(
    make_app: AppFactory, clock: WallClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Feedback alone: the target, written next to what names the ticket, would also be
    # lifted by its neighbours (tests/core/test_neighbours.py), in either ranking.
    monkeypatch.setattr(neighbours, "SHARES", (0.0,))
    by_hybrid = await _found(make_app, clock, "hybrid", seed=True)
    by_feedback = await _found(make_app, clock, "feedback", seed=False)
    assert len(by_hybrid) == len(by_feedback) == 12
    assert set(by_hybrid[:3]) == set(NAMED) == set(by_feedback[:3])
    # The platform's agents read the first few: with feedback the answer is among the
    # top 5, past two "support" memories the model prefers; hybrid ranks it 7th.
    assert ANSWER in by_feedback[:5]
    assert ANSWER not in by_hybrid[:5]
    assert by_feedback.index(ANSWER) < by_hybrid.index(ANSWER)
