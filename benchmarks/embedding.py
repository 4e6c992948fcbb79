"""The embedding backends side by side: speed, quality against torch, memory, cold start.

Per backend (torch, onnx, onnx-int8), each measured in a child process of its own so
that RSS and threads are its own: single-text latency (median of encode([text])),
throughput in batches of 8 and 32, the vectors of a corpus and its queries, and RSS
after all that. The parent then compares every backend to torch: recall@10 of the
exact top 10 (cosine) of each query against torch's top 10, and the mean and minimum
cosine between the two vectors of the same text. Finally the real server's cold
start (spawn to first 200 on /v1/health) per backend, on a warm machine (the ONNX
files exported beforehand, as the image does at build time; the one-time export is
timed too).

The corpus: 2,000 templated memory sentences (benchmarks/sentences.py, with natural
near-duplicates) and 2,000 real English sentences from the standard library's
docstrings; 400 queries of both kinds, none in the corpus.

Run: python -m benchmarks.embedding   (about 3-4 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import pydoc
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import REPO_ROOT
from benchmarks.common import machine
from benchmarks.sentences import queries
from benchmarks.sentences import sentences

BACKENDS = ("torch", "onnx", "onnx-int8")
SINGLE_RUNS = 200
BATCH_TEXTS = 1024
MODULES = (
    "asyncio", "collections", "concurrent.futures", "contextlib", "csv", "datetime",
    "decimal", "email", "functools", "http.client", "http.server", "json", "logging",
    "multiprocessing", "os", "pathlib", "pickle", "re", "shutil", "socket", "sqlite3",
    "ssl", "statistics", "subprocess", "tarfile", "threading", "unittest", "urllib.request",
    "zipfile", "argparse", "typing", "inspect", "io", "random", "string", "textwrap",
    "doctest", "difflib", "calendar", "configparser", "ftplib", "gzip", "hashlib", "heapq",
    "imaplib", "ipaddress", "itertools", "locale", "mailbox", "mimetypes", "optparse", "pdb",
    "platform", "poplib", "pprint", "queue", "sched", "selectors", "shelve", "smtplib",
    "tempfile", "timeit", "traceback", "wave", "uuid", "warnings", "weakref", "codecs",
    "xml.dom.minidom", "xmlrpc.client", "zoneinfo", "copy", "dataclasses", "enum", "glob",
    "fractions", "bisect", "abc", "ast", "dis", "cmd", "nntplib", "telnetlib", "gettext",
)  # fmt: skip


def docstring_sentences(count: int) -> list[str]:
    """Real prose: sentences of 6 to 40 words from stdlib docstrings, deduplicated, in order."""
    seen: dict[str, None] = {}
    for module in MODULES:
        text = pydoc.render_doc(module, renderer=pydoc.plaintext)
        for raw in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)):
            words = raw.split()
            if 6 <= len(words) <= 40 and raw[0].isupper() and raw.endswith("."):
                seen.setdefault(raw, None)
    found = list(seen)
    if len(found) < count:
        raise RuntimeError(f"only {len(found)} docstring sentences")
    return found[:: max(1, len(found) // count)][:count]


def corpus() -> tuple[list[str], list[str]]:
    prose = docstring_sentences(2200)
    documents = sentences(2000) + prose[:2000]
    asked = queries(200, exclude=set(documents)) + prose[2000:2200]
    return documents, asked


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def worker(backend: str, onnx_dir: str, out: str) -> None:
    """Child: load `backend`, time it, embed the corpus, write figures and vectors."""
    from plugin.embedding.encoders import load_encoder
    from plugin.settings import Settings

    settings = Settings.model_validate(
        {"MEMORY_PLUGIN_EMBEDDING_BACKEND": backend, "MEMORY_PLUGIN_ONNX_DIR": onnx_dir}
    )
    started = time.perf_counter()
    encoder = load_encoder(settings)
    load_s = time.perf_counter() - started
    texts = sentences(BATCH_TEXTS, seed=3)
    for text in texts[:20]:  # warm-up
        encoder.encode([text])
    single = []
    for text in texts[:SINGLE_RUNS]:
        begun = time.perf_counter()
        encoder.encode([text])
        single.append(time.perf_counter() - begun)
    rates = {}
    for size in (8, 32):
        begun = time.perf_counter()
        for start in range(0, BATCH_TEXTS, size):
            encoder.encode(texts[start : start + size])
        rates[size] = BATCH_TEXTS / (time.perf_counter() - begun)
    rss = rss_mib()
    documents, asked = json.loads(Path(f"{out}.corpus.json").read_text())
    vectors = [encoder.encode(documents[i : i + 32]) for i in range(0, len(documents), 32)]
    np.save(f"{out}.docs.npy", np.array([v for part in vectors for v in part], np.float32))
    np.save(f"{out}.queries.npy", np.array(encoder.encode(asked), np.float32))
    figures = {
        "load_s": load_s,
        "single_ms": statistics.median(single) * 1000,
        "rate8": rates[8],
        "rate32": rates[32],
        "rss_mib": rss,
    }
    Path(f"{out}.json").write_text(json.dumps(figures))


def recall_at_10(
    docs: np.ndarray, asked: np.ndarray, ref_docs: np.ndarray, ref_q: np.ndarray
) -> float:
    mine = np.argsort(-(asked @ docs.T), axis=1)[:, :10]
    truth = np.argsort(-(ref_q @ ref_docs.T), axis=1)[:, :10]
    return float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(mine, truth, strict=True)]))


def cold_start(backend: str, onnx_dir: str, tmp: Path) -> float:
    from harness.server_process import ServerProcess

    env = {"MEMORY_PLUGIN_EMBEDDING_BACKEND": backend, "MEMORY_PLUGIN_ONNX_DIR": onnx_dir}
    with ServerProcess(tmp / f"data-{backend}", tmp / f"{backend}.log", env=env) as server:
        server.start()
        took = server.wait_healthy()
        server.terminate()
    return took


def run_worker(
    backend: str, onnx_dir: str, tmp: Path, documents: list[str], asked: list[str]
) -> dict[str, Any]:
    out = str(tmp / backend)
    Path(f"{out}.corpus.json").write_text(json.dumps([documents, asked]))
    command = [sys.executable, "-m", "benchmarks.embedding", "--worker", backend, onnx_dir, out]
    subprocess.run(command, check=True, cwd=REPO_ROOT)
    result: dict[str, Any] = json.loads(Path(f"{out}.json").read_text())
    result["docs"] = np.load(f"{out}.docs.npy")
    result["queries"] = np.load(f"{out}.queries.npy")
    return result


HEADER = (
    f"  {'backend':<10} {'1 text ms':>9} {'batch8/s':>9} {'batch32/s':>9} {'recall@10':>9} "
    f"{'cos mean':>9} {'cos min':>9} {'RSS MiB':>8} {'load s':>7} {'cold s':>7}"
)


def report(results: dict[str, dict[str, Any]], onnx_dir: str, tmp: Path) -> None:
    ref = results["torch"]
    print(HEADER)
    for backend, r in results.items():
        both = np.concatenate([r["docs"], r["queries"]])
        cosines = (both * np.concatenate([ref["docs"], ref["queries"]])).sum(axis=1)
        recall = recall_at_10(r["docs"], r["queries"], ref["docs"], ref["queries"])
        cold = cold_start(backend, onnx_dir, tmp)
        print(
            f"  {backend:<10} {r['single_ms']:>9.2f} {r['rate8']:>9.0f} {r['rate32']:>9.0f} "
            f"{recall:>9.4f} {cosines.mean():>9.6f} {cosines.min():>9.6f} {r['rss_mib']:>8.0f} "
            f"{r['load_s']:>7.2f} {cold:>7.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", nargs=3, metavar=("BACKEND", "ONNX_DIR", "OUT"))
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    print(f"embedding.py: the embedding backends, in-process, no server ({machine()})")
    with tempfile.TemporaryDirectory(prefix="bench-embedding-") as name:
        tmp = Path(name)
        onnx_dir = str(tmp / "onnx")
        from plugin.embedding.model_files import resolve_model_dir
        from plugin.embedding.onnx_model import export_onnx

        begun = time.perf_counter()
        export_onnx(resolve_model_dir(None), Path(onnx_dir))
        took = time.perf_counter() - begun
        print(f"one-time ONNX export (fp32 + int8), as at image build: {took:.1f} s")
        documents, asked = corpus()  # made once: pydoc's output varies between processes
        print(f"corpus: {len(documents)} sentences, {len(asked)} queries (templated + docstrings)")
        results = {
            backend: run_worker(backend, onnx_dir, tmp, documents, asked) for backend in BACKENDS
        }
        report(results, onnx_dir, tmp)
    print("cold s: server spawn -> first 200 on /v1/health, ONNX files already exported")


if __name__ == "__main__":
    main()
