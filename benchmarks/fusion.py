"""How far fusing the two signals can go on LoCoMo: the shipped plan against its alternatives.

    python -m benchmarks.fusion [--data ../shared/data/locomo/locomo-dev.json]
                                [--turns speaker|dated]

Offline, no server: every memory and question of the file is embedded by the
plugin's own encoder (in-process), every memory gets its BM25 keyword vector
(adapters/keyword_encoder.py) and the inverse document frequency is counted over the
whole store as the shared layout sees it (all conversations, both memory modes;
Qdrant's formula). Then every memory is scored for every question and each
ranking applied, so fusions compare on exactly the same scores:

- dense, keyword: each signal alone;
- shipped: adapters/qdrant/ranking.py (top 100 of each, cosine + 0.03 x BM25,
  BM25 from the keyword list only); it reproduces retrieval.py's figures;
- sum w: cosine + w x BM25 with every memory scored on both (no candidate cut);
- RRF k=2: the best rank fusion;
- learned ceiling: a logistic regression on cosine, BM25, both normalised by
  the query's best, their ranks and their product, fitted on these very
  questions (in-sample: an upper bound for any fusion of these two signals,
  not a ranking one could ship).
About 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from adapters.keyword_encoder import KeywordEncoder
from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.retrieval import DEFAULT_DATA
from plugin.embedding.encoders import load_encoder
from plugin.settings import Settings

Scores = np.ndarray
Ranker = Callable[[Scores, Scores], Scores]  # (cosine, BM25), questions x memories


def embedder() -> Callable[[list[str]], Scores]:
    encoder = load_encoder(Settings())

    def embed(texts: list[str]) -> Scores:
        rows = [v for i in range(0, len(texts), 32) for v in encoder.encode(texts[i : i + 32])]
        return np.array(rows, dtype=np.float32)

    return embed


class Corpus:
    """Cosine and BM25 of every (question, memory) pair, per conversation and memory mode."""

    def __init__(self, conversations: list[locomo.Conversation]) -> None:
        embed, keywords = embedder(), KeywordEncoder()
        documents = {
            (c.sample_id, mode): [keywords.document(text) for _, _, text in c.memories[mode]]
            for c in conversations
            for mode in locomo.MODES
        }
        frequency: dict[int, int] = {}
        for vectors in documents.values():
            for vector in vectors:
                for index in set(vector.indices):
                    frequency[index] = frequency.get(index, 0) + 1
        total = sum(len(vectors) for vectors in documents.values())
        idf = {i: math.log(1 + (total - n + 0.5) / (n + 0.5)) for i, n in frequency.items()}
        self.parts: list[tuple[str, locomo.Conversation, Scores, Scores]] = []
        for c in conversations:
            questions = embed([q.text for q in c.questions])
            asked = [keywords.query(q.text) for q in c.questions]
            for mode in locomo.MODES:
                memories = embed([text for _, _, text in c.memories[mode]])
                vocabulary: dict[int, int] = {}
                weights = [
                    {
                        vocabulary.setdefault(i, len(vocabulary)): v * idf[i]
                        for i, v in zip(d.indices, d.values, strict=True)
                    }
                    for d in documents[(c.sample_id, mode)]
                ]
                by_term = np.zeros((len(weights), len(vocabulary)), dtype=np.float32)
                for row, terms in enumerate(weights):
                    for column, value in terms.items():
                        by_term[row, column] = value
                query_terms = np.zeros((len(asked), len(vocabulary)), dtype=np.float32)
                for row, query in enumerate(asked):
                    for index in query.indices:
                        if index in vocabulary:
                            query_terms[row, vocabulary[index]] = 1.0
                bm25 = query_terms @ by_term.T
                self.parts.append((mode, c, questions @ memories.T, bm25))

    def recall(self, mode: str, ranker: Ranker) -> list[float]:
        table = locomo.RecallTable()
        for part_mode, c, cosine, bm25 in self.parts:
            if part_mode != mode:
                continue
            order = np.argsort(-ranker(cosine, bm25), axis=1, kind="stable")[:, : max(locomo.KS)]
            turns = [turn for _, turn, _ in c.memories[mode]]
            for row, question in enumerate(c.questions):
                found = [turns[j] for j in order[row]]
                table.add(question.category, locomo.recall_at(found, question.evidence))
        return table.mean(locomo.HEADLINE)


def shipped(cosine: Scores, bm25: Scores, pool: int = 100, weight: float = 0.03) -> Scores:
    """adapters/qdrant/ranking.py, computed here: the union of both top lists, fused."""
    fused = np.full_like(cosine, -1e9)
    dense_top = np.argsort(-cosine, axis=1)[:, :pool]
    keyword_top = np.argsort(-bm25, axis=1)[:, :pool]
    for row in range(cosine.shape[0]):
        listed = {int(j) for j in keyword_top[row] if bm25[row, j] > 0}
        for j in listed | {int(j) for j in dense_top[row]}:
            fused[row, j] = cosine[row, j] + weight * (bm25[row, j] if j in listed else 0.0)
    return fused


def ranks(scores: Scores) -> Scores:
    return np.argsort(np.argsort(-scores, axis=1), axis=1).astype(np.float32)


def features(cosine: Scores, bm25: Scores) -> Scores:
    best = np.maximum(bm25.max(axis=1, keepdims=True), 1e-6)
    return np.stack(
        [
            cosine,
            bm25,
            cosine - cosine.max(axis=1, keepdims=True),
            bm25 / best,
            np.log1p(bm25),
            1 / (2 + ranks(cosine)),
            1 / (2 + ranks(bm25)),
            (bm25 > 0).astype(np.float32),
            cosine * bm25,
        ],
        axis=-1,
    )


def learned_ceiling(corpus: Corpus, mode: str) -> Ranker:
    """A class-weighted logistic regression fitted on every (question, memory) pair."""
    inputs, labels = [], []
    for part_mode, c, cosine, bm25 in corpus.parts:
        if part_mode != mode:
            continue
        table = features(cosine, bm25)
        turns = [turn for _, turn, _ in c.memories[mode]]
        for row, question in enumerate(c.questions):
            inputs.append(table[row])
            labels.append(np.array([turn in question.evidence for turn in turns], np.float32))
    x, y = np.concatenate(inputs), np.concatenate(labels)
    mean, spread = x.mean(axis=0), x.std(axis=0) + 1e-9
    x = (x - mean) / spread
    balance = np.where(y > 0, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    coefficients, bias = np.zeros(x.shape[1]), 0.0
    for _ in range(3000):
        error = (1 / (1 + np.exp(-(x @ coefficients + bias))) - y) * balance
        coefficients -= 0.5 * (x.T @ error) / len(y)
        bias -= 0.5 * float(error.mean())
    return lambda cosine, bm25: ((features(cosine, bm25) - mean) / spread) @ coefficients


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--turns", choices=locomo.TURN_FORMATS, default="speaker")
    args = parser.parse_args()
    conversations = locomo.load(args.data, args.turns)
    print(f"fusions on {args.data.name}, dialog turns as {args.turns!r} ({machine()})")
    corpus = Corpus(conversations)
    rankers: dict[str, Ranker] = {
        "dense": lambda cosine, bm25: cosine,
        "keyword": lambda cosine, bm25: bm25,
        "shipped": shipped,
        **{
            f"sum {w:g}": (lambda cosine, bm25, w=w: cosine + w * bm25)
            for w in (0.02, 0.03, 0.04, 0.05)
        },
        "RRF k=2": lambda cosine, bm25: 1 / (2 + ranks(cosine)) + 1 / (2 + ranks(bm25)),
    }
    header = "".join(f"{'R@' + str(k):>7}" for k in locomo.KS)
    for mode in locomo.MODES:
        print(f"\n{mode}, categories 1-4\n  {'ranking':<17}{header}")
        for name, ranker in [*rankers.items(), ("learned ceiling", learned_ceiling(corpus, mode))]:
            print(f"  {name:<17}" + "".join(f"{x:7.3f}" for x in corpus.recall(mode, ranker)))


if __name__ == "__main__":
    main()
