"""Callers for benchmarks/fairness.py: closed loops in this process or in a child process.

Every answer is recorded as an `Outcome` with the wall-clock time it finished, so
that answers from several processes can be merged in the order the platform's one
client would have seen them (the breaker model in benchmarks/fairness.py).
A flood runs in child processes of its own, its callers dealt among them: hundreds
of Python callers on one event loop would otherwise delay each other's answers and
the quiet caller's, and count it as the server's delay (256 searching callers on
one loop: the loop itself lagged up to 46 ms, p99 21 ms). Each caller holds one
kept-alive connection (benchmarks/http_caller.py: less than half aiohttp's client
CPU a request, taken from the server on a 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import random
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from collections.abc import Coroutine
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import chart_note
from benchmarks.common import machine
from benchmarks.common import percentile
from benchmarks.http_caller import Connection
from benchmarks.http_caller import Request
from benchmarks.http_caller import gather_then_close
from benchmarks.locomo import load

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo-dev.json"
QUIET = "workspace:quiet"
BACKFILL = "workspace:backfill"
QUIET_PAUSE_S = 0.02
# Refusals (429) are answered within this long (the p99 of them, on two cores).
REFUSAL_LIMIT_S = 0.05


@dataclass(frozen=True, slots=True)
class Outcome:
    stream: str  # who sent it: "quiet", "flood", "backfill", a tenant's name
    finished: float  # time.time() when the answer (or the failure) came
    seconds: float
    status: int  # 0: no answer within the client's 2 s, or a transport error


@dataclass(frozen=True)
class Flood:
    """`callers` closed-loop callers per tenant, each sending `kind` ("commit"/"search")."""

    kind: str
    tenants: tuple[str, ...]
    callers: int
    texts: tuple[str, ...]
    queries: tuple[str, ...]
    honour_retry_after: bool = True
    # Callers start spread over this many seconds: hundreds of agents do not all send in
    # the same millisecond, and a flood's first burst would otherwise measure TCP set-up.
    ramp_s: float = 0.5


def commit_request(namespace: str, text: str, rng: random.Random) -> Request:
    body = {
        "content": text,
        "kind": "fact",
        "source": "agent",
        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    }
    return "POST", f"/v1/namespaces/{namespace}/memories", body


def search_request(namespaces: Sequence[str], query: str) -> Request:
    return "POST", "/v1/search", {"namespaces": list(namespaces), "query": query, "limit": 10}


async def closed_loop(
    connection: Connection,
    stream: str,
    make: Callable[[], Request],
    until: float,
    out: list[Outcome],
    pause_s: float = 0.0,
    honour_retry_after: bool = True,
) -> None:
    """Send `make()`'s next request as soon as the last was answered (after `pause_s`), or,
    refused, once its Retry-After has passed plus a jitter of up to a quarter of it
    (unless `honour_retry_after` is false).

    The jitter is what retrying clients do (tenacity, urllib3): without it, callers
    refused together came back together, each wave sent by one child process in one
    loop iteration (50 requests, 74 ms) while the answers to the first of them waited
    to be read, and measured as the server's (measured on 2026-11-25)."""
    jitter = random.Random()  # each caller its own, seeded from the system
    while time.time() < until:
        status, took, retry_after = await connection.send(make())
        out.append(Outcome(stream, time.time(), took, status))
        wait = retry_after * (1 + jitter.uniform(0, 0.25)) if honour_retry_after else 0.0
        if pause_s or wait:
            await asyncio.sleep(min(max(pause_s, wait), max(0.0, until - time.time())))


# Processes a flood's callers are dealt among (caller n to process n % FLOOD_PROCESSES).
FLOOD_PROCESSES = 4


async def run_flood(
    base: str, flood: Flood, until: float, seed: int, part: int = 0, parts: int = 1
) -> list[Outcome]:
    """The callers of `flood` whose number modulo `parts` is `part`, each on its own
    connection."""
    out: list[Outcome] = []
    loops = []
    connections = []
    for t, tenant in enumerate(flood.tenants):
        for k in range(flood.callers):
            if (t * flood.callers + k) % parts != part:
                continue
            rng = random.Random(seed * 100_003 + t * 1_000 + k)

            def make(rng: random.Random = rng, tenant: str = tenant) -> Request:
                if flood.kind == "commit":
                    return commit_request(tenant, rng.choice(flood.texts), rng)
                return search_request([tenant], rng.choice(flood.queries))

            connection = Connection(base)
            connections.append(connection)
            delay = rng.uniform(0, flood.ramp_s)
            loop = closed_loop(connection, tenant, make, until, out, 0.0, flood.honour_retry_after)
            loops.append(_after(delay, loop))
    await warm(connections)
    await gather_then_close(connections, *loops)
    return out


async def warm(connections: Sequence[Connection]) -> None:
    """Open the callers' connections (a health check each, not measured) before the loops
    start: the platform's client keeps its connections alive, and a fresh child process
    setting up dozens at once stalled its own loop for up to 83 ms, which the first
    answers measured as the server's (measured on 2026-11-25)."""
    await asyncio.gather(*(c.send(("GET", "/v1/health", None)) for c in connections))


async def _after(delay_s: float, work: Coroutine[Any, Any, None]) -> None:
    await asyncio.sleep(delay_s)
    await work


def _child(
    base: str, flood: Flood, until: float, seed: int, part: int, parts: int, pipe: Any
) -> None:
    # What the child inherited from this process (LoCoMo's texts, the model's modules)
    # is never garbage: a full collection walking it stalled the child's callers 57 to
    # 99 ms at a phase's start, measured as the server's answers' time.
    gc.freeze()
    pipe.send(asyncio.run(run_flood(base, flood, until, seed, part, parts)))
    pipe.close()


class FloodProcess:
    """A flood in `FLOOD_PROCESSES` child processes (forked before any event loop runs
    in this one)."""

    def __init__(self, base: str, flood: Flood, until: float, seed: int) -> None:
        context = multiprocessing.get_context("fork")
        parts = min(FLOOD_PROCESSES, len(flood.tenants) * flood.callers)
        self._children = []
        for part in range(parts):
            receive, send_end = context.Pipe(duplex=False)
            process = context.Process(
                target=_child,
                args=(base, flood, until, seed, part, parts, send_end),
                daemon=True,
            )
            process.start()
            send_end.close()
            self._children.append((receive, process))

    def results(self) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for receive, process in self._children:
            outcomes += receive.recv()
            process.join()
        return outcomes


# -- phases: a flood in a child process, the quiet tenant (and a writer) in this one ----


class Texts:
    """LoCoMo's dialog turns (memories) and questions (queries)."""

    def __init__(self, path: Path) -> None:
        conversations = load(path)
        self.turns = tuple(text for c in conversations for _, _, text in c.memories["dialog"])
        self.questions = tuple(q.text for c in conversations for q in c.questions)


async def seed(base: str, namespaces: dict[str, int], texts: Texts) -> None:
    """PUT each namespace and commit its count of turns, 16 requests in flight."""
    rng = random.Random(7)
    work: list[Request] = [
        ("PUT", f"/v1/namespaces/{n}", {"kind": "workspace"}) for n in namespaces
    ]
    rows: list[Request] = []
    for name, count in namespaces.items():
        rows += [commit_request(name, rng.choice(texts.turns), rng) for _ in range(count)]
    rng.shuffle(rows)
    for batch in (work, rows):

        async def caller(pending: Iterator[Request]) -> None:
            async with Connection(base) as connection:
                for request in pending:
                    for _ in range(20):  # a 429 or a timeout while seeding: send it again
                        status, _, _ = await connection.send(request)
                        if status in (200, 201):
                            break

        shared = iter(batch)  # each request is sent by one of the callers
        await asyncio.gather(*(caller(shared) for _ in range(16)))


async def quiet_and_backfill(
    base: str, texts: Texts, until: float, out: list[Outcome], seed_: int, backfill_too: bool
) -> None:
    rng = random.Random(seed_)
    next_row = iter(range(10**9))

    def quiet() -> Request:
        return search_request([QUIET, "team:shared", "org:shared"], rng.choice(texts.questions))

    async def backfill() -> None:
        async with Connection(base) as connection:
            while time.time() < until:
                row = next(next_row)
                for request in (
                    ("PUT", f"/v1/namespaces/{BACKFILL}", {"kind": "workspace"}),
                    commit_request(BACKFILL, texts.turns[row % len(texts.turns)], rng),
                ):
                    status, took, _ = await connection.send(request)
                    out.append(Outcome("backfill", time.time(), took, status))

    async with Connection(base) as searcher:
        await searcher.open()
        quiet_loop = closed_loop(searcher, "quiet", quiet, until, out, QUIET_PAUSE_S)
        await asyncio.gather(quiet_loop, *([backfill()] if backfill_too else []))


def phase(
    base: str,
    texts: Texts,
    duration: float,
    flood: Flood | None,
    quiet: bool,
    seed_: int,
    backfill: bool = False,
) -> list[Outcome]:
    started = time.time()
    until = started + duration
    child = FloodProcess(base, flood, until, seed_) if flood is not None else None
    out: list[Outcome] = []
    if quiet:
        asyncio.run(quiet_and_backfill(base, texts, until, out, seed_, backfill))
    if child is not None:
        out += child.results()
    slow = [o.finished - started for o in out if o.status == 429 and o.seconds > REFUSAL_LIMIT_S]
    if slow:  # where in the phase the slow refusals came: a burst, or spread out
        seconds = Counter(int(t) for t in slow)
        print(
            f"  phase {seed_}: {len(slow)} refusals over {REFUSAL_LIMIT_S * 1000:.0f} ms;"
            " by second of the phase: "
            + ", ".join(f"{s}s: {n}" for s, n in sorted(seconds.items()))
        )
    return out


@contextmanager
def served(env: Mapping[str, str], layout: Mapping[str, int], texts: Texts) -> Iterator[str]:
    """A fresh server process (the shipped INFO log), seeded with `layout`, warmed up.
    Once it has stopped, what its whole log says of 5xx answers and errors."""
    from harness.raw_http import log_lines
    from harness.server_process import ServerProcess

    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        server = ServerProcess(Path(tmp) / "data", Path(tmp) / "log", env=env, log_level="INFO")
        with server:
            server.start()
            print(f"cold start: {server.wait_healthy():.2f} s")
            started = time.perf_counter()
            asyncio.run(seed(server.base_url, layout, texts))
            print(
                f"seeded {sum(layout.values()):,} memories in {len(layout)} namespaces "
                f"in {time.perf_counter() - started:.0f} s"
            )
            warm = Flood("commit", tuple(layout)[:2], 8, texts.turns, texts.questions)
            phase(server.base_url, texts, 3.0, warm, False, 0)  # the first seconds are slower
            try:
                yield server.base_url
            except BaseException:
                print("server log tail:\n" + server.log_tail())
                raise
        print(server_failures(log_lines(server)))


def server_failures(lines: Sequence[Mapping[str, Any]]) -> str:
    """What the server's log lines say of its 5xx answers and errors: counts by message,
    with the first one's time, so that a run's 503s come with their cause."""
    seen: Counter[str] = Counter()
    first: dict[str, str] = {}
    for line in lines:
        if line.get("msg") == "request" and (line.get("status") or 0) >= 500:
            what = f"{line['status']} {line.get('route')}: {line.get('error')}"
        elif line.get("level") in ("error", "critical"):
            what = f"{line['level']}: {line.get('msg')}"
        else:
            continue
        seen[what] += 1
        first.setdefault(what, str(line.get("ts")))
    if not seen:
        return "server log: no 5xx answer, no error"
    shown = "\n".join(f"  {n} x {what} (first at {first[what]})" for what, n in seen.most_common())
    return f"server log, 5xx answers and errors:\n{shown}"


# -- figures ---------------------------------------------------------------------------


def ok(o: Outcome) -> bool:
    return 200 <= o.status < 300


def describe(name: str, outcomes: Sequence[Outcome], duration: float) -> str:
    if not outcomes:
        return f"  {name}: no answers"
    ms = [o.seconds * 1000 for o in outcomes]
    statuses = Counter(o.status for o in outcomes)
    shown = ", ".join(
        f"{count} x {status or 'timeout'}" for status, count in sorted(statuses.items())
    )
    accepted = sum(map(ok, outcomes)) / duration
    return (
        f"  {name}: p50 {percentile(ms, 50):.0f} ms, p99 {percentile(ms, 99):.0f} ms, "
        f"max {max(ms):.0f} ms; accepted {accepted:.0f}/s; {shown}"
    )


def check(label: str, passed: bool, figure: str) -> bool:
    print(f"  {'PASS' if passed else 'FAIL'} {label}: {figure}")
    return passed


def command_line(doc: str | None, **defaults: float) -> argparse.ArgumentParser:
    """A benchmark's options, described by `doc`'s first line: one per `defaults`
    (`--name`, typed as its default), then `--data`."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    for name, default in defaults.items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    return parser


def run_checks(
    doc: str | None,
    title: str,
    env: Mapping[str, str],
    layout: Mapping[str, int],
    measure: Callable[[str, Texts, float], list[bool]],
    plot: Callable[[Path, str], list[Path]] | None = None,
) -> None:
    """A benchmark's command line: parse `--duration` and `--data`, serve `layout`,
    `measure` it, and count the checks that passed. With `plot`, `--plot DIR` too:
    `plot(DIR, note)` draws what `measure` recorded, `note` naming the date and command."""
    parser = command_line(doc, duration=8.0)
    if plot is not None:
        parser.add_argument("--plot", type=Path, metavar="DIR", help="draw the figures into DIR")
    args = parser.parse_args()
    texts = Texts(args.data)
    print(f"{title} ({machine()}); {model_rate()}")
    with served(env, layout, texts) as base:
        results = measure(base, texts, args.duration)
    print(f"{sum(results)} of {len(results)} checks passed")
    if plot is not None and args.plot is not None:
        for path in plot(args.plot, chart_note()):
            print(f"drew {path}")


def model_rate() -> str:
    """The model's own rate in this process, the pool the server runs: the yardstick."""
    from benchmarks.model import pool_rate
    from plugin.embedding.encoders import load_encoder
    from plugin.settings import Settings

    encoder = load_encoder(Settings.model_validate({}))
    pool_rate(encoder)  # warm-up
    rate = pool_rate(encoder)
    return f"the model alone (this process, a pool of {encoder.parallelism}): {rate:.0f} texts/s"
