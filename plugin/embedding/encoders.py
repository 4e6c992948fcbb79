"""The embedding model, loaded offline on the runtime MEMORY_PLUGIN_EMBEDDING_BACKEND names:
torch (sentence-transformers as is), onnx (the same weights exported to fp32 ONNX) or onnx-int8
(that export with dynamically quantised int8 weights: other vectors); docs/embedding.md.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol

import numpy as np

from plugin.embedding.embedding_tokens import Embedding
from plugin.embedding.embedding_tokens import Wanted
from plugin.embedding.embedding_tokens import token_rows
from plugin.embedding.embedding_tokens import wanted_tokens
from plugin.embedding.model_files import DEFAULT_MODEL
from plugin.embedding.model_files import check_onnx_modules
from plugin.embedding.model_files import model_dimension
from plugin.embedding.model_files import model_name
from plugin.embedding.model_files import resolve_model_dir
from plugin.embedding.token_projection import load_projection
from plugin.embedding.token_projection import projected_dimension
from plugin.embedding.token_projection import token_dimension
from plugin.sizing import plugin_cpus

if TYPE_CHECKING:
    from plugin.settings import Settings

Vector = list[float]
log = logging.getLogger(__name__)


class Encoder(Protocol):
    """A synchronous model: many texts in, unit-length vectors out."""

    dimension: int
    # Which model and runtime made the vectors ("all-MiniLM-L6-v2/onnx"):
    # plugin/core/fingerprint.py says which of them share a vector space.
    fingerprint: str
    parallelism: int  # how many `encode` calls may run at once, each on a thread of its own
    # Whether a lone text may be embedded on the event loop (docs/embedding.md).
    inline_lone_text: bool
    # The fixed map token vectors go through (token_projection.py); None keeps them whole.
    projection: np.ndarray | None

    @property
    def token_dimension(self) -> int:
        """The size of each token vector `embed` keeps: the projection's, or the model's."""
        ...

    def encode(self, texts: list[str]) -> list[Vector]:
        """Each text's sentence vector, never its token vectors (none are computed)."""
        ...

    def embed(self, texts: list[str], *, tokens: Wanted = False) -> list[Embedding]:
        """Each text's sentence vector, with its token vectors where `tokens` asks for them
        and the model's shape allows: only a rerank reads them, and they cost GIL time."""
        ...

    def embed_lone(self, texts: list[str], *, tokens: Wanted = False) -> list[Embedding]:
        """`embed` for a text embedded on the event loop with nothing else running
        (`inline_lone_text`): it may use every core, where `embed` uses its share."""
        ...


class SentenceTransformerEncoder:
    """sentence-transformers on the CPU, normalised output (cosine = dot product)."""

    parallelism = 1  # torch uses every core for one batch already
    inline_lone_text = False  # one text takes several ONNX times: keep the loop free

    def __init__(self, model: Any, model_name: str = DEFAULT_MODEL) -> None:
        self._model = model
        self.fingerprint = f"{model_name}/torch"
        dimension = model.get_embedding_dimension()
        if not isinstance(dimension, int):
            raise ValueError("the embedding model does not report its dimension")
        self.dimension: int = dimension
        self.projection = load_projection(model_name, dimension)
        self.token_dimension = token_dimension(dimension, self.projection)

    @classmethod
    def load(cls, model_dir: Path | None = None) -> SentenceTransformerEncoder:
        """Load `model_dir`, or the packaged all-MiniLM-L6-v2. Takes seconds."""
        offline()
        name = model_name(model_dir)
        from sentence_transformers import SentenceTransformer

        source = str(resolve_model_dir(model_dir))
        model = SentenceTransformer(source, device="cpu", local_files_only=True)
        return cls(model, name)

    def _encode(self, texts: list[str], **options: Any) -> Any:
        """The model's `encode`, the texts as one batch, normalised."""
        return self._model.encode(
            texts,
            batch_size=max(1, len(texts)),
            normalize_embeddings=True,
            show_progress_bar=False,
            **options,
        )

    def encode(self, texts: list[str]) -> list[Vector]:
        return [row.tolist() for row in self._encode(texts, convert_to_numpy=True)]

    def embed_lone(self, texts: list[str], *, tokens: Wanted = False) -> list[Embedding]:
        # never inline (`inline_lone_text`); torch's own threads
        return self.embed(texts, tokens=tokens)

    def embed(self, texts: list[str], *, tokens: Wanted = False) -> list[Embedding]:
        """`Encoder.embed`: where `tokens` asks, the token vectors from the same call."""
        wanted = wanted_tokens(tokens, len(texts))
        if not any(wanted):
            return [Embedding(vector) for vector in self.encode(texts)]
        rows = self._encode(texts, output_value=None)  # every output: the token vectors too
        tokenizer = self._model.tokenizer  # [UNK] stands for text: kept, as on ONNX
        special = [i for i in tokenizer.all_special_ids if i != tokenizer.unk_token_id]
        found: list[Embedding] = []
        for row, want in zip(rows, wanted, strict=True):
            ids = row["input_ids"].cpu().numpy()
            keep = row["attention_mask"].cpu().numpy() * ~np.isin(ids, special)
            hidden = row["token_embeddings"].float().cpu().numpy()
            vector = row["sentence_embedding"].float().cpu().numpy()
            vector = vector / max(float(np.linalg.norm(vector)), 1e-12)  # not done for dicts
            same = want and hidden.shape[1] == self.dimension  # not when pooled in several modes
            kept = (
                token_rows(hidden[None], keep[None], ids[None], self.projection)[0]
                if same
                else None
            )
            found.append(Embedding(vector.tolist(), kept))
        return found


def require_torch(why: str) -> None:
    """Raise ValueError naming the image to use where torch is not installed: the slim
    image carries the ONNX backends and the exported model only (Dockerfile)."""
    if torch_installed():
        return
    raise ValueError(
        f"{why} needs torch, which this installation does not have (the slim image runs "
        f"the onnx backends only): use the image memory-plugin-vector:{_version()}-full "
        "(the Dockerfile's `full` target)"
    )


def torch_installed() -> bool:
    """Whether the torch backend and the ONNX export can run here (not in the slim image)."""
    return bool(
        importlib.util.find_spec("torch") and importlib.util.find_spec("sentence_transformers")
    )


def _version() -> str:
    try:
        return importlib.metadata.version("memory-plugin-vector")
    except importlib.metadata.PackageNotFoundError:
        return "<version>"


def offline() -> None:
    """Offline by construction: these libraries would otherwise try the hub."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Progress bars would break "one line on stderr" for start-up failures.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def configured_fingerprint(settings: Settings) -> str:
    """The fingerprint `load_encoder(settings)` will report, without loading anything."""
    return f"{model_name(settings.embedding_model)}/{settings.embedding_backend}"


def configured_dimension(settings: Settings) -> int:
    """The dimension `load_encoder(settings)` will report: read from the model's files,
    loaded only when they do not say (plugin/embedding/model_files.py)."""
    dimension = model_dimension(settings.embedding_model)
    return load_encoder(settings).dimension if dimension is None else dimension


def configured_token_dimension(settings: Settings) -> int:
    """The size of the token vectors `load_encoder(settings)` will keep (token_projection.py)."""
    model = model_name(settings.embedding_model)
    return projected_dimension(model, configured_dimension(settings))


def onnx_dir(settings: Settings) -> Path:
    """Where the ONNX files are: MEMORY_PLUGIN_ONNX_DIR; else `onnx/` in the model's directory
    (where sentence-transformers keeps them, and the image's build exports them) when they
    are there or it is writable; else `models/` under the data directory."""
    if settings.onnx_dir is not None:
        return settings.onnx_dir
    beside = resolve_model_dir(settings.embedding_model) / "onnx"
    if beside.is_dir() or os.access(beside.parent, os.W_OK):
        return beside
    return settings.data_dir / "models" / f"{model_name(settings.embedding_model)}-onnx"


def load_encoder(settings: Settings, cpus: int | None = None) -> Encoder:
    """The configured model on the configured backend, its sessions sized for `cpus`
    (plugin/sizing.py) where the settings leave them unset. An ONNX backend's export (seconds,
    needs torch) is made once per `onnx_dir`: at image build time, else at the first start."""
    backend = settings.embedding_backend
    if backend == "torch":
        require_torch("MEMORY_PLUGIN_EMBEDDING_BACKEND=torch")
        return SentenceTransformerEncoder.load(settings.embedding_model)
    from plugin.embedding import onnx_model

    offline()
    source = resolve_model_dir(settings.embedding_model)
    check_onnx_modules(source)  # before an export: such a model is not exported either
    target = onnx_dir(settings)
    onnx_model.check_export(target, source)
    path = target / onnx_model.ONNX_FILES[backend]
    if not path.is_file():
        name = model_name(settings.embedding_model)
        require_torch(f"exporting {name} to ONNX (there is no export in {target})")
        log.info("exporting the model to ONNX (once)", extra={"onnx_dir": str(target)})
        onnx_model.export_onnx(source, target)
    fingerprint = configured_fingerprint(settings)
    sessions = embedding_sessions(settings, cpus)
    return onnx_model.OnnxEncoder.load(source, path, fingerprint, sessions)


# Sessions when unset: one per usable CPU, at most this many (each costs tens of MiB).
MAX_DEFAULT_SESSIONS = 4


def embedding_sessions(settings: Settings, cpus: int | None = None) -> int:
    """MEMORY_PLUGIN_EMBEDDING_SESSIONS, else the CPUs the plugin sizes itself for (capped):
    `cpus`, or plugin/sizing.py's `plugin_cpus`."""
    if settings.embedding_sessions is not None:
        return settings.embedding_sessions
    return max(1, min(MAX_DEFAULT_SESSIONS, plugin_cpus(settings) if cpus is None else cpus))
