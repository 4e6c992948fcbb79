"""The token vectors' fixed projection (plugin/embedding/token_projection.py).

The shipped model's token vectors are kept through its map: fewer numbers, each row of
unit length, the whole row's direction through the map; the size the settings name
before any model loads is the one the encoder keeps; a model without a map keeps its
token vectors whole; a map of another size is not applied.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plugin.embedding import token_projection
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.embedding.encoders import configured_token_dimension
from plugin.embedding.model_files import DEFAULT_MODEL
from plugin.settings import Settings
from tests.embedding.own_models import HIDDEN
from tests.embedding.own_models import save_model
from tests.embedding.own_models import save_transformer

TEXTS = ["Caroline went to the pottery class on Tuesday.", "What did Melanie paint?"]


def test_the_shipped_models_token_vectors_go_through_its_map(
    encoder: SentenceTransformerEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = token_projection.load_projection(DEFAULT_MODEL, encoder.dimension)
    assert matrix is not None
    assert matrix.shape == (encoder.dimension, 128)
    assert encoder.token_dimension == 128 == configured_token_dimension(Settings.from_env({}))
    projected = [e.tokens for e in encoder.embed(TEXTS, tokens=True)]
    monkeypatch.setattr(encoder, "projection", None)
    whole = [e.tokens for e in encoder.embed(TEXTS, tokens=True)]
    for rows, full in zip(projected, whole, strict=True):
        assert rows is not None
        assert full is not None
        found, expected = np.array(rows), np.array(full) @ matrix
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        assert found.shape == (len(full), 128)
        assert np.allclose(np.linalg.norm(found, axis=1), 1.0, atol=1e-5)
        assert np.allclose(found, expected, atol=1e-5)


def test_a_model_without_a_map_keeps_its_token_vectors_whole(tmp_path: Path) -> None:
    model = save_model(save_transformer(tmp_path / "bert"), tmp_path / "tiny", ("mean",), False)
    settings = Settings.model_validate({"MEMORY_PLUGIN_EMBEDDING_MODEL": str(model)})
    encoder = SentenceTransformerEncoder.load(model)
    assert encoder.projection is None
    assert encoder.token_dimension == HIDDEN == configured_token_dimension(settings)
    tokens = encoder.embed(TEXTS[:1], tokens=True)[0].tokens
    assert tokens is not None
    assert np.array(tokens).shape[1] == HIDDEN


def test_a_map_of_another_size_is_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(token_projection, "PROJECTIONS", tmp_path)
    np.save(tmp_path / "tiny.npy", np.eye(HIDDEN, 8, dtype=np.float32))
    assert token_projection.load_projection("tiny", HIDDEN) is not None
    assert token_projection.projected_dimension("tiny", HIDDEN) == 8
    assert token_projection.load_projection("tiny", 2 * HIDDEN) is None  # rows: another model
    assert token_projection.projected_dimension("tiny", 2 * HIDDEN) == 2 * HIDDEN
    np.save(tmp_path / "wide.npy", np.eye(8, 8, dtype=np.float32))
    assert token_projection.load_projection("wide", 8) is None  # no fewer numbers: no map


def test_loading_a_map_keeps_numpys_blas_to_one_thread() -> None:
    """Its threads would spin on the cores the model's sessions need."""
    from threadpoolctl import ThreadpoolController

    blas = ThreadpoolController().select(internal_api="openblas")
    with blas.limit(limits=2):  # as numpy starts on two cores or more
        assert token_projection.load_projection(DEFAULT_MODEL, 384) is not None
        assert {info["num_threads"] for info in blas.info()} == {1}
