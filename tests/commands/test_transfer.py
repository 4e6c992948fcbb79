"""Export and import: round trips between real stores searched with the real model.

Source: the embedded store (qdrant-edge on disk). Targets: a fresh embedded
store, qdrant-client's in-process `:memory:` server layout, and Pinecone
through the HTTP-level fake. "Identical" means the same memories, in the same
order, with the same scores (to float32 precision), for ranked searches and
for listings.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.pinecone import PineconeBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from adapters.values import SearchMode
from harness.pinecone_backend import pinecone_backend
from harness.pinecone_fake import FakePinecone
from plugin.cli import main
from plugin.commands import export_import
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.settings import Settings
from plugin.transfer import jsonl
from tests.support.backends import started
from tests.support.transfer import NAMES
from tests.support.transfer import NOW
from tests.support.transfer import T0
from tests.support.transfer import corpus
from tests.support.transfer import export_bytes
from tests.support.transfer import import_bytes
from tests.support.transfer import same_export
from tests.support.transfer import searches
from tests.support.transfer import seed


@pytest.fixture
def pinecone_options() -> dict[str, Any]:
    return {"dimension": 384}


def pinecone(fake: FakePinecone) -> PineconeBackend:
    return pinecone_backend(fake, timeout_s=10)


def test_configured_fingerprint_and_dimension_match_the_loaded_model(
    encoder: SentenceTransformerEncoder, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path)
    if "embedding_backend" in Settings.model_fields:  # the session's model runs on torch
        settings = settings.model_copy(update={"embedding_backend": "torch"})
    assert export_import.configured_fingerprint(settings) == encoder.fingerprint
    assert export_import.configured_dimension(settings) == encoder.dimension == 384


async def test_round_trip_into_every_backend_searches_identically(
    encoder: SentenceTransformerEncoder, tmp_path: Path, fake: FakePinecone
) -> None:
    async with started(QdrantEdgeBackend(384, tmp_path / "source")) as source:
        await seed(source, encoder)
        at_source = await searches(source, encoder, SearchMode.DENSE)
        data = await export_bytes(source, encoder.fingerprint)
    # Keyword scores use the engine's IDF, which counts the swept (deleted) memory until a
    # vacuum, per shard: the reference for every ranking is therefore a fresh import
    # into the embedded store, and the source must agree with it where no statistics
    # enter (dense scores).
    async with started(QdrantEdgeBackend(384, tmp_path / "reference")) as reference:
        await import_bytes(data, reference)
        expected = {mode: await searches(reference, encoder, mode) for mode in SearchMode}
    assert at_source == expected[SearchMode.DENSE]
    lines = data.splitlines()
    assert json.loads(lines[0])["fingerprint"] == encoder.fingerprint
    assert json.loads(lines[-1]) == {
        "type": "end",
        "namespaces": 3,
        "memories": 120,
        "finished_at": NOW.isoformat().replace("+00:00", ".000000Z"),
    }
    assert b"an expired memory" not in data
    assert b"custom:gone" not in data
    found = {mode: sum(len(hits) for hits in expected[mode]) for mode in SearchMode}
    assert found[SearchMode.DENSE] == found[SearchMode.HYBRID] > 300  # plenty to compare
    assert 50 < found[SearchMode.KEYWORD] < found[SearchMode.DENSE]  # only what matches

    targets = {
        "embedded": QdrantEdgeBackend(384, tmp_path / "target"),
        "qdrant :memory:": QdrantServerBackend(384, location=":memory:"),
        "pinecone": pinecone(fake),
    }
    for label, target in targets.items():
        async with started(target):
            first = await import_bytes(data, target)
            assert (first.report.namespaces_written, first.report.written) == (3, 120), label
            assert first.report.embedded == 0, label
            for mode in target.search_modes:  # every ranking the target offers
                found = await searches(target, encoder, mode)
                if label == "embedded" or mode is SearchMode.DENSE:
                    assert found == expected[mode], (label, mode)
                else:  # keyword IDF: the embedded store counts it per shard, these per index
                    assert _found_ids(found) == _found_ids(expected[mode]), (label, mode)
            again = await import_bytes(data, target)
            assert (again.report.namespaces_written, again.report.written) == (0, 0), label
            assert (again.report.namespaces_unchanged, again.report.unchanged) == (3, 120), label
            assert same_export(await export_bytes(target, encoder.fingerprint), data), label


def _found_ids(results: list[Any]) -> list[list[str]]:
    """What each search found, in no order (the ranking may differ, the memories not)."""
    return [sorted(memory.id for memory, _ in hits) for hits in results]


async def test_pinecone_export_reads_the_index_not_only_fresh_writes(
    encoder: SentenceTransformerEncoder, tmp_path: Path, fake: FakePinecone
) -> None:
    async with started(QdrantEdgeBackend(384, tmp_path / "source")) as source:
        await seed(source, encoder)
        data = await export_bytes(source, encoder.fingerprint)
    async with started(pinecone(fake)) as writer:
        await import_bytes(data, writer)
    async with started(pinecone(fake)) as reader:  # a new process: an empty overlay
        assert same_export(await export_bytes(reader, encoder.fingerprint), data)
        assert fake.calls["GET /vectors/list"] >= 3  # one or more pages per namespace


def test_other_fingerprint_is_reembedded_from_content(
    encoder: SentenceTransformerEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def source_side() -> tuple[list[Any], bytes]:
        async with started(QdrantEdgeBackend(384, tmp_path / "source")) as source:
            await seed(source, encoder)
            # Dense: what re-embedding decides (keyword statistics differ after the sweep).
            dense = await searches(source, encoder, SearchMode.DENSE)
            return dense, await export_bytes(source, encoder.fingerprint)

    expected, data = asyncio.run(source_side())
    foreign = [json.loads(line) for line in data.splitlines()]
    foreign[0]["fingerprint"] = "some-other-model/onnx"
    for line in foreign:
        if line["type"] == "memory":  # vectors of another space: useless here
            line["vector"] = jsonl.encode_vector([1.0] + [0.0] * 383)
    path = tmp_path / "foreign.jsonl.gz"
    with jsonl.open_out(str(path)) as out:
        out.write(b"".join(jsonl.dumps(line) for line in foreign))
    echoed: list[str] = []
    monkeypatch.setattr(export_import, "load_encoder", lambda _: encoder)
    settings = Settings(data_dir=tmp_path / "target")
    assert export_import.run_import(settings, str(path), echoed.append) == 0, echoed
    assert any("re-embedded" in line for line in echoed)
    assert any("memories 120 written (120 embedded)" in line for line in echoed), echoed

    async def target_side() -> list[Any]:
        async with started(QdrantEdgeBackend(384, tmp_path / "target")) as target:
            return await searches(target, encoder, SearchMode.DENSE)

    assert asyncio.run(target_side()) == expected


async def test_import_keeps_service_rules(tmp_path: Path) -> None:
    """Expired items are skipped, ids are canonical, a memory needs its namespace."""
    memory = MemoryRecord(
        id="AAAAAAAA-0000-4000-8000-000000000001",
        namespace="team:x",
        content="kept",
        kind="fact",
        source="agent",
        created_at=T0,
    )
    lines = [
        jsonl.Header("all-MiniLM-L6-v2/torch", 4, NOW, "test").to_json(),
        jsonl.namespace_line(NamespaceRecord(name="team:x", kind="team", created_at=T0)),
        jsonl.namespace_line(
            NamespaceRecord(name="team:old", kind="team", created_at=T0, expires_at=NOW)
        ),
        jsonl.memory_line(memory, [1.0, 0, 0, 0]),
        jsonl.memory_line(
            MemoryRecord(**{**_fields(memory), "id": memory.id[:-1] + "2", "expires_at": NOW}),
            [1.0, 0, 0, 0],
        ),
        jsonl.memory_line(
            MemoryRecord(**{**_fields(memory), "namespace": "team:nowhere"}), [1.0, 0, 0, 0]
        ),
        jsonl.Trailer(2, 3, NOW).to_json(),
    ]
    data = b"".join(jsonl.dumps(line) for line in lines)
    async with started(QdrantEdgeBackend(4, tmp_path)) as target:
        writer = await import_bytes(data, target)
        report = writer.report
        assert (report.written, report.skipped_expired, report.skipped_invalid) == (1, 1, 1)
        assert report.namespaces_skipped_expired == 1
        assert await target.get_namespace("team:old") is None
        stored = await target.get_memory("team:x", memory.id.lower())
        assert stored is not None
        assert stored.created_at == T0


async def test_an_import_keeps_places_and_places_memories_without_one(tmp_path: Path) -> None:
    """A file's places are kept; memories without one (an older export, the postgres
    plugin) take places below the namespace's lowest, by `created_at`; a stored memory's
    place outlives a file without places."""
    base = MemoryRecord(
        id="00000000-0000-4000-8000-000000000000",
        namespace="team:x",
        content="c",
        kind="fact",
        source="agent",
        created_at=T0,
    )

    def made(n: int, minutes: int, position: int | None) -> MemoryRecord:
        fields = {**_fields(base), "id": f"{base.id[:-1]}{n}", "content": f"memory {n}"}
        fields.update(created_at=T0 + timedelta(minutes=minutes), position=position)
        return MemoryRecord(**fields)

    memories = [made(1, 2, None), made(2, 0, None), made(3, 5, 4), made(4, 1, None)]

    def file_of(written: list[MemoryRecord]) -> bytes:
        lines = [
            jsonl.Header("all-MiniLM-L6-v2/torch", 4, NOW, "test").to_json(),
            jsonl.namespace_line(NamespaceRecord(name="team:x", kind="team", created_at=T0)),
            *(jsonl.memory_line(memory, [1.0, 0, 0, 0]) for memory in written),
            jsonl.Trailer(1, len(written), NOW).to_json(),
        ]
        return b"".join(jsonl.dumps(line) for line in lines)

    async with started(QdrantEdgeBackend(4, tmp_path)) as target:
        await import_bytes(file_of(memories), target)
        placed = {m.id[-1]: m.position for m in await target.list_memories(["team:x"], _all(), 9)}
        assert placed == {"3": 4, "1": 3, "4": 2, "2": 1}
        unplaced = [replace(memory, position=None) for memory in memories]
        again = await import_bytes(file_of(unplaced), target)
        assert (again.report.written, again.report.unchanged) == (0, 4)
        stored = await target.list_memories(["team:x"], _all(), 9)
        assert {m.id[-1]: m.position for m in stored} == placed


def test_a_position_that_is_not_a_whole_number_is_refused() -> None:
    memory = MemoryRecord(
        id="00000000-0000-4000-8000-000000000001",
        namespace="org:a",
        content="c",
        kind="fact",
        source="agent",
        created_at=T0,
    )
    lines = [
        jsonl.Header("m/torch", 4, NOW, "test").to_json(),
        jsonl.namespace_line(NamespaceRecord(name="org:a", kind="org", created_at=T0)),
        {**jsonl.memory_line(memory, [1.0, 0, 0, 0]), "position": 1.5},
        jsonl.Trailer(1, 1, NOW).to_json(),
    ]
    with pytest.raises(jsonl.FormatError, match=r"line 3: position 1\.5 is not a whole number"):
        list(jsonl.parse_lines(iter([jsonl.dumps(line) for line in lines])))


def _all() -> MemoryFilter:
    return MemoryFilter(now=NOW)


def _fields(memory: MemoryRecord) -> dict[str, Any]:
    return {name: getattr(memory, name) for name in MemoryRecord.__slots__}


def test_a_file_cut_short_or_miscounted_is_refused() -> None:
    header = jsonl.dumps(jsonl.Header("m/torch", 4, NOW, "test").to_json())
    namespace = jsonl.dumps(
        jsonl.namespace_line(NamespaceRecord(name="org:a", kind="org", created_at=T0))
    )
    with pytest.raises(jsonl.FormatError, match="without its end line"):
        list(jsonl.parse_lines(iter([header, namespace])))
    wrong = jsonl.dumps(jsonl.Trailer(2, 0, NOW).to_json())
    with pytest.raises(jsonl.FormatError, match="counts 2 namespaces"):
        list(jsonl.parse_lines(iter([header, namespace, wrong])))
    with pytest.raises(jsonl.FormatError, match="header must be the first line"):
        list(jsonl.parse_lines(iter([namespace, header])))


def test_cli_export_and_import_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`export` and `import` from the environment's settings, gzip by name, no model load."""

    async def prepare() -> None:
        async with started(QdrantEdgeBackend(384, tmp_path / "a")) as source:
            records, memories = corpus()
            for record in records:
                await source.save_namespace(record)
            vectors = [[1.0 if j == i % 384 else 0.0 for j in range(384)] for i in range(121)]
            await source.transfer.upsert_memories(list(zip(memories, vectors, strict=True)))

    asyncio.run(prepare())
    monkeypatch.setattr(export_import, "load_encoder", _no_model)
    out = str(tmp_path / "backup.jsonl.gz")
    monkeypatch.setenv("MEMORY_PLUGIN_DATA_DIR", str(tmp_path / "a"))
    assert main(["export", "--out", out]) == 0
    assert "export: 3 namespaces, 120 memories" in capsys.readouterr().out
    monkeypatch.setenv("MEMORY_PLUGIN_DATA_DIR", str(tmp_path / "b"))
    assert main(["import", "--in", out]) == 0
    assert "memories 120 written (0 embedded)" in capsys.readouterr().out
    assert main(["import", "--in", out]) == 0
    assert "memories 0 written (0 embedded), 120 unchanged" in capsys.readouterr().out
    assert main(["export", "--out", str(tmp_path / "again.jsonl")]) == 0
    with jsonl.open_in(out) as first:
        original = first.read().splitlines()
    again = (tmp_path / "again.jsonl").read_bytes().splitlines()
    assert original[1:-1] == again[1:-1]  # header and end line carry the export's times
    (tmp_path / "cut.jsonl").write_bytes(b"\n".join(again[:-1]) + b"\n")
    assert main(["import", "--in", str(tmp_path / "cut.jsonl")]) == 1
    assert "without its end line" in capsys.readouterr().err
    # To stdout (the runbook's backup through `kubectl exec`): the file alone, the line on stderr.
    assert main(["export", "--out", "-"]) == 0
    streamed = capsys.readouterr()
    assert streamed.out.splitlines()[-1].startswith('{"type":"end"')
    assert "export: 3 namespaces, 120 memories to stdout" in streamed.err


def _no_model(_: Settings) -> Any:
    raise AssertionError("the model must not be loaded when the vectors are reused")


async def test_a_reimport_of_changed_fields_reuses_the_stored_vectors(
    encoder: SentenceTransformerEncoder, tmp_path: Path
) -> None:
    """Content to embed (another model's file), but the store already holds that content
    under those ids: the stored vectors stand in, the model is not asked."""
    async with started(QdrantEdgeBackend(384, tmp_path / "source")) as source:
        await seed(source, encoder)
        data = await export_bytes(source, encoder.fingerprint)
    async with started(QdrantEdgeBackend(384, tmp_path / "target")) as target:
        first = await import_bytes(data, target, encoder)
        assert (first.report.written, first.report.embedded, first.report.reused) == (120, 120, 0)
        a_fact = "00000000-0000-4000-8000-000000000000"  # note 0 of NAMES[0]: a fact
        before = await target.get_stored_memory(NAMES[0], a_fact)
        changed = data.replace(b'"kind":"fact"', b'"kind":"checkpoint"')
        again = await import_bytes(changed, target, encoder)
        report = again.report
        assert (report.written, report.embedded, report.reused) == (42, 0, 42)  # the facts
        assert report.unchanged == 78
        after = await target.get_stored_memory(NAMES[0], a_fact)
        assert before is not None
        assert after is not None
        assert (before[0].kind, after[0].kind) == ("fact", "checkpoint")
        assert after[1] == before[1]  # the very vector, not a new one
