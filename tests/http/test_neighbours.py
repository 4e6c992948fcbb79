"""The neighbours' lift through the whole app with the real model (docs/backends.md,
"Neighbours in the write order"): the answer written just after what names the question
is found among the first few; the same memories written with the answer apart are not.
"""

from __future__ import annotations

from typing import Any

from harness.clocks import WallClock
from tests.support.app import AppFactory
from tests.support.app import served
from tests.support.helpdesk import ANSWER
from tests.support.helpdesk import NAMED
from tests.support.helpdesk import NS
from tests.support.helpdesk import OTHERS
from tests.support.helpdesk import QUESTION


async def _first_five(make_app: AppFactory, clock: WallClock, written: list[str]) -> list[Any]:
    async for api in served(make_app, clock, search="hybrid"):
        assert (await api.put_ns(NS)).status == 200
        for content in written:
            assert (await api.commit(NS, content)).status == 201
        reply = await api.search(NS, query=QUESTION, limit=5)
        assert reply.status == 200
        assert set(reply.body) == {"memories"}
        return [memory["content"] for memory in reply.body["memories"]]
    raise AssertionError("not served")


async def test_the_answer_written_after_the_question_is_lifted_into_the_first_five(
    make_app: AppFactory, clock: WallClock
) -> None:
    after = await _first_five(make_app, clock, [*NAMED, ANSWER, *OTHERS])
    assert set(after[:3]) == set(NAMED)  # the best stay first
    assert ANSWER in after


async def test_the_same_answer_written_apart_is_not(make_app: AppFactory, clock: WallClock) -> None:
    apart = await _first_five(make_app, clock, [ANSWER, *OTHERS, *NAMED])
    assert set(apart[:3]) == set(NAMED)
    assert ANSWER not in apart
