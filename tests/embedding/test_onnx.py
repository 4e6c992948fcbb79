"""The ONNX backends against sentence-transformers (torch) itself, with the real model.

Why these hold: the fingerprint rule (plugin/core/fingerprint.py) treats torch and onnx
as one vector space and onnx-int8 as another. These tests are what that rests on:
fp32 ONNX must give torch's vectors, int8 must be close but not the same.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.server_process import REPO_ROOT
from harness.server_process import clean_env
from plugin.embedding.embedder import BatchingEmbedder
from plugin.embedding.encoders import Encoder
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.embedding.encoders import configured_fingerprint
from plugin.embedding.encoders import embedding_sessions
from plugin.embedding.encoders import load_encoder
from plugin.embedding.encoders import onnx_dir
from plugin.embedding.model_files import resolve_model_dir
from plugin.embedding.onnx_model import ONNX_FILES
from plugin.embedding.onnx_model import SOURCE_FILE
from plugin.embedding.onnx_model import OnnxEncoder
from plugin.embedding.onnx_model import check_export
from plugin.settings import Settings
from plugin.settings import SettingsError
from plugin.sizing import usable_cpus

TEXTS = [
    "the user prefers tabs for indentation",
    "Deploys to production happen on Tuesdays after the standup.",
    "x",
    "Ünïcödé, emoji 🚀 and CJK 漢字 in one memory",
    "word " * 400,  # past the 256-token window: truncated alike
    "Alice from the payments team owns the flaky checkout test in CI.",
]


def settings_for(backend: str, tmp_path: Path) -> Settings:
    return Settings.model_validate(
        {"MEMORY_PLUGIN_EMBEDDING_BACKEND": backend, "MEMORY_PLUGIN_DATA_DIR": str(tmp_path)}
    )


@pytest.fixture(scope="session")
def onnx_encoder(tmp_path_factory: pytest.TempPathFactory) -> Encoder:
    return load_encoder(settings_for("onnx", tmp_path_factory.mktemp("onnx")))


@pytest.fixture(scope="session")
def int8_encoder(tmp_path_factory: pytest.TempPathFactory) -> Encoder:
    return load_encoder(settings_for("onnx-int8", tmp_path_factory.mktemp("int8")))


def cosines(a: list[list[float]], b: list[list[float]]) -> np.ndarray:
    return np.sum(np.array(a) * np.array(b), axis=1)


def test_fingerprints_name_the_backend(
    encoder: SentenceTransformerEncoder, onnx_encoder: Encoder, int8_encoder: Encoder
) -> None:
    assert encoder.fingerprint == "all-MiniLM-L6-v2/torch"
    assert onnx_encoder.fingerprint == "all-MiniLM-L6-v2/onnx"
    assert int8_encoder.fingerprint == "all-MiniLM-L6-v2/onnx-int8"
    assert onnx_encoder.dimension == int8_encoder.dimension == 384
    for backend in ("torch", "onnx", "onnx-int8"):
        assert configured_fingerprint(settings_for(backend, Path("."))).endswith(f"/{backend}")


def test_onnx_gives_torchs_vectors(
    encoder: SentenceTransformerEncoder, onnx_encoder: Encoder
) -> None:
    reference = encoder.encode(TEXTS)
    batched = onnx_encoder.encode(TEXTS)
    alone = [onnx_encoder.encode([text])[0] for text in TEXTS]
    assert cosines(batched, reference).min() > 0.99999
    assert cosines(alone, reference).min() > 0.99999
    assert np.allclose(np.linalg.norm(np.array(batched), axis=1), 1.0, atol=1e-5)
    embedded = onnx_encoder.embed(TEXTS) + encoder.embed(TEXTS)
    assert np.allclose([e.vector for e in embedded], batched + reference, atol=1e-6)
    assert all(e.tokens is None for e in embedded)  # not kept


def test_token_vectors_come_with_the_sentence_vector_alike_on_onnx_and_torch(
    encoder: SentenceTransformerEncoder, onnx_encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same call's token vectors, unit length, [CLS] and [SEP] left out, at most the
    model's 256 tokens, the same on both runtimes, batched or alone; the sentence vectors
    beside them are those `encode` gives."""
    for model in (encoder, onnx_encoder):
        sentence = [embedding.vector for embedding in model.embed(TEXTS, tokens=True)]
        assert cosines(sentence, model.encode(TEXTS)).min() > 0.99999
    reference = [embedding.tokens for embedding in encoder.embed(TEXTS, tokens=True)]
    batched = [embedding.tokens for embedding in onnx_encoder.embed(TEXTS, tokens=True)]
    alone = [onnx_encoder.embed([text], tokens=True)[0].tokens for text in TEXTS]
    for expected, *found in zip(reference, batched, alone, strict=True):
        assert expected is not None
        for rows in found:
            assert rows is not None
            assert np.array(rows).shape == np.array(expected).shape
            assert cosines(rows, expected).min() > 0.9999
    assert len(reference[2] or []) == 1  # "x": one token between [CLS] and [SEP]
    assert len(reference[4] or []) == 254  # truncated at 256, less [CLS] and [SEP]
    assert np.allclose(np.linalg.norm(np.array(reference[0]), axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_token_vectors_are_computed_only_for_the_texts_that_want_them(
    encoder: SentenceTransformerEncoder, onnx_encoder: Encoder, runtime: str
) -> None:
    model = encoder if runtime == "torch" else onnx_encoder
    wanted = [n % 2 == 0 for n in range(len(TEXTS))]
    every = model.embed(TEXTS, tokens=True)
    some = model.embed(TEXTS, tokens=wanted)
    assert [e.tokens is not None for e in some] == wanted
    for want, all_of_them, chosen in zip(wanted, every, some, strict=True):
        assert cosines([chosen.vector], [all_of_them.vector]).min() > 0.99999
        if want:
            assert all_of_them.tokens is not None
            assert chosen.tokens is not None
            assert cosines(chosen.tokens, all_of_them.tokens).min() > 0.9999
    assert all(e.tokens is None for e in model.embed(TEXTS, tokens=[False] * len(TEXTS)))


async def test_the_batching_embedder_computes_token_vectors_for_those_who_read_them(
    onnx_encoder: Encoder,
) -> None:
    """A commit's text keeps its token vectors; a search's that does not rerank has none."""
    embedder = BatchingEmbedder(onnx_encoder, keep_tokens=True)
    await embedder.start()
    try:
        kept, searched, reranked = await asyncio.gather(
            embedder.embed(TEXTS[0]),
            embedder.embed(TEXTS[1], tokens=False),
            embedder.embed(TEXTS[3], tokens=True),
        )
    finally:
        await embedder.close()
    assert (kept.tokens is not None, searched.tokens, reranked.tokens is not None) == (
        True,
        None,
        True,
    )
    assert embedder.stats.batches < 3  # they shared batches


def test_a_pool_of_sessions_gives_torchs_vectors_side_by_side(
    encoder: SentenceTransformerEncoder, tmp_path: Path
) -> None:
    settings = settings_for("onnx", tmp_path).model_copy(update={"embedding_sessions": 2})
    pooled = load_encoder(settings)
    assert pooled.parallelism == 2
    reference = encoder.encode(TEXTS)
    with ThreadPoolExecutor(2) as threads:  # two batches at once, each on its own session
        halves = list(threads.map(pooled.encode, [TEXTS[:3], TEXTS[3:]] * 3))
    for found in zip(*[iter(halves)] * 2, strict=True):
        assert cosines([v for half in found for v in half], reference).min() > 0.99999
    alone = [pooled.embed_lone([text])[0].vector for text in TEXTS]  # the lone-text session
    assert cosines(alone, reference).min() > 0.99999


class CountingSession:
    """A session that counts its runs (ONNX Runtime's own cannot be patched)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.runs = 0

    def run(self, *args: Any) -> Any:
        self.runs += 1
        return self.session.run(*args)


def test_only_a_text_embedded_alone_takes_the_session_with_every_cores_threads(
    tmp_path: Path,
) -> None:
    settings = settings_for("onnx", tmp_path).model_copy(update={"embedding_sessions": 2})
    pooled = load_encoder(settings)
    assert isinstance(pooled, OnnxEncoder)
    solo = CountingSession(pooled.solo)
    pooled.solo = solo
    pooled.embed([TEXTS[0]])  # one text of a load: a batch may start beside it
    assert solo.runs == 0
    pooled.embed_lone([TEXTS[0]])
    assert solo.runs == 1


def test_a_text_embedded_alone_leaves_no_thread_spinning_after_it(tmp_path: Path) -> None:
    """ONNX Runtime's threads, left to spin once a run ends, burned a third of a core for
    a while after every lone text: CPU the engine worker and the next requests need."""
    settings = settings_for("onnx", tmp_path).model_copy(update={"embedding_sessions": 2})
    encoder = load_encoder(settings)
    encoder.embed_lone([TEXTS[0]])  # warm: the threads exist
    spent = []
    for text in TEXTS[:3]:
        encoder.embed_lone([text])
        started = time.process_time()
        time.sleep(0.1)
        spent.append(time.process_time() - started)
    assert max(spent) < 0.015, spent


def test_sessions_default_to_the_usable_cores(tmp_path: Path) -> None:
    settings = settings_for("onnx", tmp_path)
    assert embedding_sessions(settings) == min(4, usable_cpus())
    one = settings.model_copy(update={"embedding_sessions": 1})
    assert embedding_sessions(one) == 1
    assert load_encoder(one).parallelism == 1


def test_int8_is_close_but_another_space(
    encoder: SentenceTransformerEncoder, int8_encoder: Encoder
) -> None:
    found = cosines(int8_encoder.encode(TEXTS), encoder.encode(TEXTS))
    assert found.min() > 0.9
    assert found.max() < 0.99999  # its vectors do differ: why it has its own fingerprint


async def test_batching_embedder_on_onnx_matches_one_at_a_time(onnx_encoder: Encoder) -> None:
    embedder = BatchingEmbedder(onnx_encoder)
    await embedder.start()
    try:
        embedded = await asyncio.gather(*(embedder.embed(text) for text in TEXTS))
    finally:
        await embedder.close()
    assert embedder.stats.texts == len(TEXTS)
    alone = [onnx_encoder.encode([text])[0] for text in TEXTS]
    assert cosines([embedding.vector for embedding in embedded], alone).min() > 0.99999


def test_export_of_another_model_is_refused(tmp_path: Path) -> None:
    (tmp_path / SOURCE_FILE).write_text(json.dumps({"model": "other", "weights_bytes": 1}))
    with pytest.raises(ValueError, match="made from 'other'"):
        check_export(tmp_path, resolve_model_dir(None))


def test_onnx_files_live_beside_the_model_unless_configured(tmp_path: Path) -> None:
    default = onnx_dir(settings_for("onnx", tmp_path))
    assert (default / ONNX_FILES["onnx"]).is_file()  # exported by the fixtures above
    chosen = Settings.model_validate({"MEMORY_PLUGIN_ONNX_DIR": str(tmp_path / "x")})
    assert onnx_dir(chosen) == tmp_path / "x"


def test_the_onnx_backend_loads_without_torch(onnx_encoder: Encoder, tmp_path: Path) -> None:
    """Why its cold start is short: no torch, no sentence-transformers import."""
    script = (
        "import sys; from plugin.embedding.encoders import load_encoder; "
        "from plugin.settings import Settings; "
        f"e = load_encoder(Settings(data_dir={str(tmp_path)!r})); "
        "assert len(e.encode(['hi'])[0]) == 384; "
        "print(sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_unknown_embedding_backend_is_a_setting_error() -> None:
    with pytest.raises(SettingsError, match="MEMORY_PLUGIN_EMBEDDING_BACKEND"):
        Settings.from_env({"MEMORY_PLUGIN_EMBEDDING_BACKEND": "tensorflow"})
    assert Settings.from_env({}).embedding_backend == "onnx"


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_the_weights_are_read_as_onnx_reads_them(onnx_encoder: Encoder, backend: str) -> None:
    """The session pool shares these (plugin/embedding/onnx_weights.py); `onnx` itself is
    not in the slim image, so they are read without it: the same names, types and values."""
    import onnx
    from onnx import numpy_helper

    from plugin.embedding.onnx_weights import read_initializers

    path = onnx_dir(settings_for(backend, Path("."))) / ONNX_FILES[backend]
    found = read_initializers(path)
    assert found is not None
    expected = [(i.name, numpy_helper.to_array(i)) for i in onnx.load(str(path)).graph.initializer]
    assert [name for name, _ in found] == [name for name, _ in expected]
    for (_, mine), (_, theirs) in zip(found, expected, strict=True):
        assert mine.dtype == theirs.dtype
        assert np.array_equal(mine, theirs)
