"""A commit's cost beyond the model's, the plugin as the README starts it.

Against the real server process (`serve` defaults: the embedded store, `sync` durability, the
default ranking, the shipped INFO log), driven by wrk (C, one thread: callers are other pods),
each figure against the model's own measured in the same round (the configured backend in this
process with one ONNX Runtime session, the server idle):

1. sequential commits with ids (what `memory-backfill -apply` sends), one wrk connection:
   the median over the model's single text, in each of `--rounds` rounds;
2. a backfill-like first pass: one wrk connection sending, for each row, the PUT of its
   namespace and then its commit with a new id, the rows going round 70 new namespaces:
   a row's time over the model's single text;
3. 8 closed-loop committers: commits/s against one session's batch-8 rate, measured just
   before and after each window.

Targets: + 2.5 ms in each round, + 3 ms a row, 0.85x. The plugin's own CPU per commit is
`benchmarks.commit_cpu`'s; where a commit's time goes, step by step, `benchmarks.commit_steps`'.
Needs wrk. Run: python -m benchmarks.commit_path [--rounds 3]   (about 2 minutes)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
from collections.abc import Awaitable
from collections.abc import Callable
from pathlib import Path

import aiohttp

from benchmarks.closed_loop import post_json
from benchmarks.closed_loop import wrk_closed_loop
from benchmarks.common import run_against_server
from benchmarks.common import wrk_output
from benchmarks.durability import wrk_sequential_s
from benchmarks.model import batch8_rate
from benchmarks.model import load_model
from benchmarks.model import single_text_s
from benchmarks.sentences import sentences
from harness.server_process import WIDE_SHARES
from harness.server_process import ServerProcess

NAMESPACE = "workspace:commit-path"
PRELOAD_WINDOW = 1000  # the closed loop's window number for the preload's ids
BACKFILL_NAMESPACES = 70
BACKFILL_S = 4.0

# One connection: for row r, the PUT of namespace r % 70, then a commit into it. The next
# request is chosen as an answer comes (wrk asks for one request ahead, at its start).
BACKFILL_SCRIPT = """
local texts = {{{texts}}}
local n = 0
local json = {{["Content-Type"] = "application/json"}}
response = function(status, headers, body)
  n = n + 1
end
request = function()
  local row = math.floor(n / 2)
  local path = string.format("/v1/namespaces/workspace:backfill-{window}-%d", row % {spread})
  if n % 2 == 0 then
    return wrk.format("PUT", path, json, '{{"kind":"workspace"}}')
  end
  local body = string.format(
    '{{"content":%s,"kind":"fact","source":"agent","id":"7f3e2a10-0000-4000-9%03d-%012d"}}',
    texts[(row % #texts) + 1], {window}, row)
  return wrk.format("POST", path .. "/memories", json, body)
end
"""


def backfill_row_s(base_url: str, texts: list[str], window: int) -> float:
    """Seconds a row takes (its PUT and its commit) in wrk's backfill-like first pass."""
    quoted = ",".join(f"[==[{json.dumps(text)}]==]" for text in texts)
    script = BACKFILL_SCRIPT.format(texts=quoted, window=window, spread=BACKFILL_NAMESPACES)
    out = wrk_output(base_url, script, 1, BACKFILL_S)
    found = re.search(r"(\d+) requests in ([0-9.]+)(ms|s)", out)
    if found is None or "Non-2xx" in out:
        raise RuntimeError(f"wrk's backfill: {out}")
    seconds = float(found.group(2)) / (1000 if found.group(3) == "ms" else 1)
    return seconds / (int(found.group(1)) / 2)


def measure(onnx_dir: str, rounds: int) -> Callable[[ServerProcess], Awaitable[None]]:
    async def run(server: ServerProcess) -> None:
        base = server.base_url
        url = f"{base}/v1/namespaces/{NAMESPACE}/memories"
        async with aiohttp.ClientSession() as session:
            status, _ = await post_json(
                session, "PUT", url.rsplit("/", 1)[0], {"kind": "workspace"}
            )
            if status != 200:
                raise RuntimeError(f"PUT namespace answered {status}")
        texts = sentences(4000)
        await asyncio.to_thread(wrk_closed_loop, url, texts, PRELOAD_WINDOW)  # warm, preloaded
        encoder = load_model("onnx", onnx_dir)
        sequential, rows, loops = [], [], []
        for number in range(rounds):
            model_s = single_text_s(encoder)
            commit_s = await asyncio.to_thread(wrk_sequential_s, url, texts, number)
            assert commit_s is not None
            row_s = await asyncio.to_thread(backfill_row_s, base, texts, number)
            before = batch8_rate(encoder)
            rate = await asyncio.to_thread(wrk_closed_loop, url, texts, number)
            after = batch8_rate(encoder)
            assert rate is not None
            sequential.append((model_s, commit_s))
            rows.append((model_s, row_s))
            loops.append((rate, (before + after) / 2))
            print(
                f"round {number + 1}: model {model_s * 1000:.2f} ms a text;"
                f" commit {commit_s * 1000:.2f} ms (+ {(commit_s - model_s) * 1000:.2f});"
                f" backfill row {row_s * 1000:.2f} ms (+ {(row_s - model_s) * 1000:.2f});"
                f" 8 callers {rate:.0f}/s against batch-8 {(before + after) / 2:.0f}/s"
                f" = {rate / ((before + after) / 2):.2f}x",
                flush=True,
            )
        worst = max(commit - model for model, commit in sequential) * 1000
        row = statistics.median(r - model for model, r in rows) * 1000
        ratio = statistics.median(rate / model for rate, model in loops)
        print()
        print(
            f"sequential commit, worst round: + {worst:.2f} ms"
            f" (target + 2.5: {verdict(worst <= 2.5)})"
        )
        print(f"backfill-like row, median round: + {row:.2f} ms (target + 3: {verdict(row <= 3)})")
        print(
            f"8 closed-loop callers, median round: {ratio:.2f}x"
            f" (target 0.85x: {verdict(ratio >= 0.85)})"
        )

    return run


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-onnx-") as onnx_dir:
        from plugin.embedding.model_files import resolve_model_dir
        from plugin.embedding.onnx_model import export_onnx

        export_onnx(resolve_model_dir(None), Path(onnx_dir))  # as the image does at build time
        env = {"MEMORY_PLUGIN_ONNX_DIR": onnx_dir, "MEMORY_PLUGIN_LOG_LEVEL": "INFO", **WIDE_SHARES}
        run_against_server(
            "commit_path: real server process, embedded qdrant-edge, defaults",
            measure(onnx_dir, args.rounds),
            env,
        )


if __name__ == "__main__":
    main()
