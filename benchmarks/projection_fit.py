"""The token vectors' fixed projection: fitted, written, and its recall per size.

    python -m benchmarks.projection_fit [--write] [--sweep 96,128,160]

Fits the map of plugin/embedding/token_projection.py on text unrelated to any store:
sentences of the docstrings of Python's standard library (the files, parsed, never
imported), embedded by the plugin's own model with its token vectors whole. The map is
the leading eigenvectors of the token vectors' second moment (uncentred: MaxSim compares
dot products, which it keeps best). Prints the share of the second moment each size
keeps; `--write` stores the map of `DIMENSION` beside the model's code. `--sweep` then
asks LoCoMo's development half in-process, rerank as shipped, with token vectors whole
and at each size: the same memories, questions and store settings for every row.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import re
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import locomo
from benchmarks import sweep
from benchmarks.common import machine
from plugin.embedding.encoders import Encoder
from plugin.embedding.encoders import load_encoder
from plugin.embedding.model_files import DEFAULT_MODEL
from plugin.embedding.token_projection import projection_file
from plugin.settings import Settings

DIMENSION = 128
SENTENCES = 6000
BATCH = 64
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def stdlib_sentences(limit: int = SENTENCES) -> list[str]:
    """`limit` sentences of 6-40 words, mostly letters, spread evenly over the standard
    library's docstrings in file order (its tests and IDLE left out)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found: list[str] = []
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if "test" in path.parts or "idlelib" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                for paragraph in re.split(r"\n\s*\n", ast.get_docstring(node) or ""):
                    for sentence in _SENTENCE_END.split(" ".join(paragraph.split())):
                        letters = sum(c.isalpha() for c in sentence)
                        if 6 <= len(sentence.split()) <= 40 and letters > 0.7 * len(sentence):
                            found.append(sentence)
    unique = list(dict.fromkeys(found))
    return unique[:: max(1, len(unique) // limit)][:limit]


def fit(encoder: Encoder, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The eigenvalues (largest first) and eigenvectors of the whole token vectors'
    second moment over `sentences`."""
    encoder.projection = None
    rows = [
        embedded.tokens.array()  # type: ignore[union-attr]
        for start in range(0, len(sentences), BATCH)
        for embedded in encoder.embed(sentences[start : start + BATCH], tokens=True)
    ]
    tokens = np.concatenate(rows)
    print(f"fitted on {len(sentences)} sentences, {len(tokens)} token vectors")
    values, vectors = np.linalg.eigh(tokens.T @ tokens / len(tokens))
    return values[::-1], vectors[:, ::-1]


async def recall_by_size(encoder: Encoder, vectors: np.ndarray, sizes: list[int]) -> None:
    """Rerank recall with token vectors whole and through the leading `sizes` directions."""
    conversations = locomo.load(sweep.DEFAULT_DATA, "speaker")
    found = sweep.tables(["whole"] + [f"{size} dimensions" for size in sizes])
    for label, size in [("whole", None)] + [(f"{s} dimensions", s) for s in sizes]:
        encoder.projection = None if size is None else np.ascontiguousarray(vectors[:, :size])
        with tempfile.TemporaryDirectory(prefix="bench-projection-") as tmp:
            async with sweep.seeded(conversations, Path(tmp), encoder) as seeded:
                for conversation, question, embedded in seeded.questions:
                    query = seeded.rerank_query(question.text, embedded)
                    await seeded.record(found[label], conversation, question, query)
    sweep.print_tables(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"store the {DIMENSION}-size map")
    parser.add_argument("--sweep", default="", help="sizes to ask LoCoMo with, e.g. 96,128")
    args = parser.parse_args()
    print(f"token projection of {DEFAULT_MODEL} ({machine()})")
    encoder = load_encoder(Settings.from_env({}))
    started = time.monotonic()
    values, vectors = fit(encoder, stdlib_sentences())
    print(f"  {time.monotonic() - started:.0f} s")
    for size in (64, 96, 128, 160, 192):
        print(f"  {size} dimensions keep {values[:size].sum() / values.sum():.3f} of the moment")
    if args.write:
        path = projection_file(DEFAULT_MODEL)
        path.parent.mkdir(exist_ok=True)
        np.save(path, np.ascontiguousarray(vectors[:, :DIMENSION], dtype=np.float32))
        print(f"wrote {path}")
    if args.sweep:
        asyncio.run(recall_by_size(encoder, vectors, [int(s) for s in args.sweep.split(",")]))


if __name__ == "__main__":
    main()
