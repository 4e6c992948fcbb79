"""Token vectors as byte codes (adapters/qdrant/token_codes.py): the engine's MaxSim over
the codes, read back, is the float MaxSim of the model's own token vectors.

Real qdrant-edge shard with the store's multivector parameters; vectors are seeded random
unit vectors in the model's dimension, with the few large components the model's have.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import qdrant_edge as qe

from adapters.engine.engine import token_params
from adapters.qdrant import token_codes
from adapters.values import PackedTokens

DIMENSION = 384


def _unit_rows(rng: np.random.Generator, count: int) -> PackedTokens:
    rows = rng.normal(size=(count, DIMENSION))
    rows[:, 7] += 5.0  # a shared, heavy direction, as a transformer's token vectors have
    return PackedTokens(rows / np.linalg.norm(rows, axis=1, keepdims=True))


def test_codes_are_bytes_and_balance_each_rows_sum() -> None:
    rows = token_codes.encoded(_unit_rows(np.random.default_rng(1), 30))
    codes = np.asarray(rows)
    assert codes.shape == (30, token_codes.code_dimension(DIMENSION))
    assert codes.min() >= 0
    assert codes.max() <= 255
    assert np.array_equal(codes, np.rint(codes))
    assert np.all(codes.sum(axis=1) == 127 * token_codes.code_dimension(DIMENSION))


def test_the_engines_max_sim_over_codes_reads_back_as_the_float_max_sim(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    config = qe.EdgeConfig(vectors={"t": token_params(DIMENSION)})
    shard = qe.EdgeShard.create(str(tmp_path / "shard"), config)
    memories = [_unit_rows(rng, int(rng.integers(1, 40))) for _ in range(200)]
    points = [qe.Point(n, {"t": token_codes.encoded(m)}, {}) for n, m in enumerate(memories)]
    shard.update(qe.UpdateOperation.upsert_points(points))
    errors = []
    for _ in range(20):
        query = _unit_rows(rng, int(rng.integers(1, 12)))
        coded = token_codes.encoded_query(query)
        found = shard.query(
            qe.QueryRequest(limit=200, query=qe.Query.Nearest(coded.rows, using="t"))
        )
        assert len(found) == 200
        exact = [(query.array() @ memories[p.id].array().T).max(axis=1).sum() for p in found]
        errors += [
            (coded.max_sim(p.score) - e) / len(query) for p, e in zip(found, exact, strict=True)
        ]
        # in the engine's order, up to rounding: no memory ranked above a clearly better one
        assert all(e >= max(exact[n:]) - 0.008 * len(query) for n, e in enumerate(exact))
    shard.close()
    assert np.abs(errors).max() < 0.01  # a query token's best cosine, within
    assert abs(np.mean(errors)) < 0.0005  # and no bias


def test_a_unit_vector_of_few_dimensions_is_not_clipped() -> None:
    assert token_codes.scale(8) == 127.0  # every component of a unit vector fits
    assert 127 / token_codes.scale(DIMENSION) > 0.4  # the model's largest seen: 0.395
