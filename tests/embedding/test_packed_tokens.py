"""Token vectors as the model hands them on (adapters/values.py, `PackedTokens`): one
float32 array that reads as rows of floats and crosses to the engine worker as its bytes."""

from __future__ import annotations

import pickle

import numpy as np

from adapters import frames
from adapters.values import PackedTokens
from adapters.values import float_rows

ROWS = np.array([[0.6, 0.8, 0.0], [0.0, 0.28, 0.96]], dtype=np.float32)


def test_it_reads_as_rows_of_floats() -> None:
    packed = PackedTokens(ROWS)
    expected = ROWS.tolist()
    assert len(packed) == 2
    assert packed
    assert packed[1] == expected[1]
    assert packed[:1] == expected[:1]
    assert list(packed) == expected
    assert float_rows(packed) == expected == float_rows(expected)
    assert all(type(x) is float for row in float_rows(packed) for x in row)
    assert packed == PackedTokens(ROWS.copy())
    assert packed != PackedTokens(ROWS[:1])


def test_a_frame_carries_its_bytes_not_a_list_of_floats() -> None:
    rows = np.random.default_rng(3).standard_normal((25, 384)).astype(np.float32)
    packed = PackedTokens(rows)
    frame = frames.encode(("call", 1, packed))
    assert len(frame) < rows.nbytes + 200  # a list of these floats pickles to over twice that
    assert len(pickle.dumps(rows.tolist())) > 2 * rows.nbytes
    (_, _, received) = pickle.loads(frame[4:])
    assert received == packed
    assert float_rows(received) == rows.tolist()
