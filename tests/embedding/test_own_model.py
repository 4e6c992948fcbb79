"""Bringing one's own model on the default (onnx) backend: any pooling, either file format.

Why: MEMORY_PLUGIN_EMBEDDING_MODEL takes any local sentence-transformers directory, and
a stronger model is the way past all-MiniLM-L6-v2's recall. sentence-transformers 6
writes `{"embedding_dimension": .., "pooling_mode": "mean"}`, earlier releases one
boolean per mode; BGE models pool by CLS. The models are made here (tests/embedding/
own_models.py): random weights, nothing downloaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.server_process import REPO_ROOT
from harness.server_process import ServerProcess
from harness.server_process import clean_env
from plugin.embedding import encoders
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.embedding.encoders import load_encoder
from plugin.embedding.model_files import Pooling
from plugin.embedding.model_files import model_dimension
from plugin.embedding.model_files import read_pooling
from plugin.settings import Settings
from tests.embedding.own_models import HIDDEN
from tests.embedding.own_models import save_model
from tests.embedding.own_models import save_transformer
from tests.embedding.own_models import write_legacy_config

TEXTS = [
    "the user prefers tabs",
    "deploys happen on tuesdays after the standup",
    "x",
    "Ünïcödé and 漢字 are unknown here",
    "long " * 40,  # past MAX_SEQ_LENGTH: truncated alike
    "",
]


@pytest.fixture(scope="module")
def transformer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_transformer(tmp_path_factory.mktemp("bert"))


def onnx_settings(model: Path, data: Path, **more: Any) -> Settings:
    return Settings.model_validate(
        {"MEMORY_PLUGIN_EMBEDDING_MODEL": str(model), "MEMORY_PLUGIN_DATA_DIR": str(data)} | more
    )


@pytest.mark.parametrize(
    ("modes", "legacy"),
    [
        (("mean",), False),
        (("cls",), False),
        (("mean",), True),
        (("cls",), True),
        (("max",), False),
        (("mean_sqrt_len_tokens",), False),
        (("weightedmean",), False),
        (("lasttoken",), False),
        (("cls", "mean"), True),  # several modes: concatenated, in sentence-transformers' order
    ],
    ids=lambda v: "-".join(v) if isinstance(v, tuple) else ("legacy" if v else "st6"),
)
def test_onnx_gives_torchs_vectors(
    transformer: Path, tmp_path: Path, modes: tuple[str, ...], legacy: bool
) -> None:
    model = save_model(transformer, tmp_path / f"tiny-{'-'.join(modes)}", modes, legacy)
    onnx = load_encoder(onnx_settings(model, tmp_path / "data"))  # exports on first use
    torch = SentenceTransformerEncoder.load(model)
    assert onnx.dimension == torch.dimension == model_dimension(model) == HIDDEN * len(modes)
    assert onnx.fingerprint == f"{model.name}/onnx"
    reference = np.array(torch.encode(TEXTS))
    for found in (onnx.encode(TEXTS), [onnx.encode([t])[0] for t in TEXTS]):
        assert np.sum(np.array(found) * reference, axis=1).min() > 0.99999


def test_a_default_prompt_is_put_before_every_text(transformer: Path, tmp_path: Path) -> None:
    """sentence-transformers does so when the model names one (E5, BGE query models)."""
    model = save_model(transformer, tmp_path / "prompted", ("mean",), legacy=False)
    config_path = model / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text())
    config |= {"prompts": {"query": "query: ", "document": ""}, "default_prompt_name": "query"}
    config_path.write_text(json.dumps(config))
    onnx = load_encoder(onnx_settings(model, tmp_path / "data"))
    reference = np.array(SentenceTransformerEncoder.load(model).encode(TEXTS))
    assert np.sum(np.array(onnx.encode(TEXTS)) * reference, axis=1).min() > 0.99999
    plain = save_model(transformer, tmp_path / "plain", ("mean",), legacy=False)
    unprompted = np.array(SentenceTransformerEncoder.load(plain).encode(TEXTS[:1]))
    assert float(np.sum(unprompted * reference[:1])) < 0.99999  # the prompt did change them


def test_both_formats_read_alike(tmp_path: Path) -> None:
    (tmp_path / "1_Pooling").mkdir()
    config = tmp_path / "1_Pooling" / "config.json"
    config.write_text(json.dumps({"embedding_dimension": 128, "pooling_mode": "cls"}))
    assert read_pooling(tmp_path) == Pooling(128, ("cls",))
    config.write_text(json.dumps({"embedding_dimension": 8, "pooling_mode": ["cls", "max"]}))
    assert read_pooling(tmp_path) == Pooling(8, ("cls", "max"))
    assert model_dimension(tmp_path) == 16
    legacy = {"word_embedding_dimension": 128, "pooling_mode_cls_token": True}
    config.write_text(json.dumps(legacy | {"pooling_mode_mean_tokens": False}))
    assert read_pooling(tmp_path) == Pooling(128, ("cls",))
    config.write_text(json.dumps({"word_embedding_dimension": 4}))  # no mode set: mean
    assert read_pooling(tmp_path) == Pooling(4, ("mean",))
    config.write_text(json.dumps({"embedding_dimension": 4, "pooling_mode": "median"}))
    with pytest.raises(ValueError, match="unknown pooling mode"):
        read_pooling(tmp_path)


def test_a_module_the_onnx_backends_lack_is_refused(transformer: Path, tmp_path: Path) -> None:
    model = save_model(transformer, tmp_path / "dense", ("mean",), legacy=False)
    modules = json.loads((model / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "x.models.Dense"})
    (model / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match=r"not x\.models\.Dense.*BACKEND=torch"):
        load_encoder(onnx_settings(model, tmp_path / "data"))


def test_without_torch_the_torch_backend_names_the_full_image(
    monkeypatch: pytest.MonkeyPatch, transformer: Path, tmp_path: Path
) -> None:
    """The slim image: torch is not installed, so it cannot run nor export (Dockerfile)."""
    monkeypatch.setattr(encoders, "torch_installed", lambda: False)
    unexported = save_model(transformer, tmp_path / "unexported", ("mean",), legacy=False)
    torch = onnx_settings(unexported, tmp_path, MEMORY_PLUGIN_EMBEDDING_BACKEND="torch")
    with pytest.raises(ValueError, match=r"use the image memory-plugin-vector:\S+-full"):
        load_encoder(torch)
    with pytest.raises(ValueError, match=r"exporting unexported to ONNX .* needs torch.*-full"):
        load_encoder(onnx_settings(unexported, tmp_path / "data"))


def call(url: str, method: str, body: Any) -> Any:
    request = urllib.request.Request(
        url,
        method=method,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "legacy"), [("mean", False), ("cls", True)], ids=["st6-mean", "legacy-cls"]
)
def test_export_onnx_then_serve(transformer: Path, tmp_path: Path, mode: str, legacy: bool) -> None:
    """As an operator would: `export-onnx`, then `serve` on the default backend, commit, search."""
    model = save_model(transformer, tmp_path / f"tiny-{mode}", (mode,), legacy)
    env = {"MEMORY_PLUGIN_EMBEDDING_MODEL": str(model), "MEMORY_PLUGIN_DATA_DIR": str(tmp_path)}
    exported = subprocess.run(
        [sys.executable, "-m", "plugin.cli", "export-onnx"],
        cwd=REPO_ROOT,
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert exported.returncode == 0, exported.stderr
    assert (model / "onnx" / "model.onnx").is_file()
    serving = {
        "MEMORY_PLUGIN_SEARCH": "dense",  # the ranking is the vectors' alone
        # A loaded machine may take longer than 1.5 s (the default) for a new store's first write.
        "MEMORY_PLUGIN_BACKEND_TIMEOUT": "10",
    }
    server = ServerProcess(tmp_path / "data", tmp_path / "server.log", env=env | serving)
    try:
        server.start()
        server.wait_healthy()
        namespace = f"{server.base_url}/v1/namespaces/workspace:own"
        call(namespace, "PUT", {"kind": "workspace"})
        for text in TEXTS[:3]:
            call(
                f"{namespace}/memories",
                "POST",
                {"content": text, "kind": "fact", "source": "agent"},
            )
        for text in TEXTS[:3]:
            found = call(
                f"{server.base_url}/v1/search",
                "POST",
                {"namespaces": ["workspace:own"], "query": text},
            )
            assert found["memories"][0]["content"] == text, server.log_tail()
        assert server.terminate() == 0, server.log_tail()
    finally:
        server.close()


def test_legacy_files_are_what_older_releases_wrote(transformer: Path, tmp_path: Path) -> None:
    """Guards the fixture: the legacy rewrite is the format the packaged model ships in."""
    model = save_model(transformer, tmp_path / "old", ("mean",), legacy=False)
    write_legacy_config(model, ("mean",))
    packaged = json.loads(
        (Path(encoders.resolve_model_dir(None)) / "1_Pooling" / "config.json").read_text()
    )
    written = json.loads((model / "1_Pooling" / "config.json").read_text())
    assert set(written) <= set(packaged) | {
        "pooling_mode_weightedmean_tokens",
        "pooling_mode_lasttoken",
    }
