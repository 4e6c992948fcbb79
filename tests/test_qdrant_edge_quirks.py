"""Pins the qdrant-edge-py 0.9.0 behaviour that shaped adapters/qdrant/layout.py.

If this test starts failing after an upgrade, the quirk is fixed: `pinned` could
then be stored as a bool again.
"""

from __future__ import annotations

from pathlib import Path

import qdrant_edge as qe


def test_bool_match_value_never_matches(tmp_path: Path) -> None:
    shard = qe.EdgeShard.create(
        str(tmp_path / "s"),
        qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=2, distance=qe.Distance.Cosine)),
    )
    shard.update(
        qe.UpdateOperation.upsert_points([qe.Point(1, [1.0, 0.0], {"flag": True, "flag_int": 1})])
    )

    def hits(condition: object) -> int:
        records, _ = shard.scroll(qe.ScrollRequest(limit=10, filter=qe.Filter(must=[condition])))
        return len(records)

    assert hits(qe.FieldCondition("flag", match=qe.MatchValue(True))) == 0
    assert hits(qe.FieldCondition("flag_int", match=qe.MatchValue(1))) == 1
    shard.close()
