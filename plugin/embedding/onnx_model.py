"""The sentence-transformers model on ONNX Runtime: exported once, offline, then run without torch.

`load(sessions=N)` runs N single-threaded sessions side by side and one N-threaded session for a
lone text, sharing one copy of the weights; why: docs/embedding.md, "Sessions side by side". The
model's Transformer runs in ONNX; its pooling, in numpy, mode for mode as sentence-transformers'
Pooling module does, so the vectors are torch's (tests/embedding/test_own_model.py).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adapters.values import TokenVectors
from plugin.embedding.embedding_tokens import Embedding
from plugin.embedding.embedding_tokens import Wanted
from plugin.embedding.embedding_tokens import token_rows
from plugin.embedding.embedding_tokens import wanted_tokens
from plugin.embedding.model_files import Pooling
from plugin.embedding.model_files import check_onnx_modules
from plugin.embedding.model_files import default_prompt
from plugin.embedding.model_files import max_seq_length
from plugin.embedding.model_files import read_pooling
from plugin.embedding.onnx_weights import read_initializers
from plugin.embedding.token_projection import load_projection
from plugin.embedding.token_projection import token_dimension

# The ONNX files per embedding backend, named as sentence-transformers names them.
ONNX_FILES = {"onnx": "model.onnx", "onnx-int8": "model_quint8_avx2.onnx"}
SOURCE_FILE = "source.json"  # which model an export was made from


def source_of(model_dir: Path) -> dict[str, Any]:
    """What identifies the weights an export came from: name and weights size."""
    weights = sorted(p for p in model_dir.glob("*.safetensors")) or sorted(model_dir.glob("*.bin"))
    return {"model": model_dir.name, "weights_bytes": sum(p.stat().st_size for p in weights)}


def check_export(out_dir: Path, model_dir: Path) -> None:
    """Raise ValueError when `out_dir` holds an export of other weights than `model_dir`'s;
    by name where the model directory has no weights (the slim image carries the export only)."""
    path = out_dir / SOURCE_FILE
    if not path.is_file():
        return
    found, expected = json.loads(path.read_text()), source_of(model_dir)
    if expected["weights_bytes"] == 0 and found.get("model") == expected["model"]:
        return
    if found != expected:
        raise ValueError(
            f"the ONNX export in {out_dir} was made from {found.get('model')!r}, "
            f"not the configured model {expected['model']!r}: point MEMORY_PLUGIN_ONNX_DIR "
            "at an empty directory (it is exported there at start)"
        )


def export_onnx(model_dir: Path, out_dir: Path) -> None:
    """Write every missing file of `ONNX_FILES` into `out_dir`. Needs torch; takes seconds."""
    check_onnx_modules(model_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    check_export(out_dir, model_dir)
    fp32 = out_dir / ONNX_FILES["onnx"]
    int8 = out_dir / ONNX_FILES["onnx-int8"]
    if fp32.is_file() and int8.is_file():
        return
    if not fp32.is_file():
        _export_fp32(model_dir, fp32)
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
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic
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


def pool(hidden: np.ndarray, mask: np.ndarray, modes: Sequence[str]) -> np.ndarray:
    """One row per text: each mode's vector, concatenated in `modes`' order."""
    rows = np.arange(hidden.shape[0])
    weights = mask[..., None].astype(np.float32)
    parts = []
    for mode in modes:
        if mode == "cls":  # the first real token
            parts.append(hidden[rows, mask.argmax(axis=1)])
        elif mode == "max":
            parts.append(np.where(weights > 0, hidden, -np.inf).max(axis=1))
        elif mode in ("mean", "mean_sqrt_len_tokens"):
            total = (hidden * weights).sum(axis=1)
            count = np.clip(weights.sum(axis=1), 1e-9, None)
            parts.append(total / (count if mode == "mean" else np.sqrt(count)))
        elif mode == "weightedmean":  # later tokens weigh more: 1, 2, 3, ... from the first
            steps = np.arange(1, hidden.shape[1] + 1, dtype=np.float32)[None, :, None]
            scaled = weights * (steps - mask.argmax(axis=1)[:, None, None])
            parts.append((hidden * scaled).sum(axis=1) / np.clip(scaled.sum(axis=1), 1e-9, None))
        elif mode == "lasttoken":
            length = mask.shape[1]
            backwards = mask[:, ::-1]
            offset = np.where(backwards.max(axis=1) == 0, length - 1, backwards.argmax(axis=1))
            parts.append((hidden * weights)[rows, length - offset - 1])
        else:
            raise ValueError(f"unknown pooling mode {mode!r}")
    return np.concatenate(parts, axis=1)


class OnnxEncoder:
    """Tokenizer, ONNX Runtime sessions, the model's pooling, L2 normalisation: `Encoder`
    without torch. `encode` and `embed` may run on `parallelism` threads at once, a session
    each; `embed_lone`, with nothing else running, takes `solo`."""

    inline_lone_text = True  # one text is quick: the event loop may wait for it
    prompt = ""  # put before every text, as sentence-transformers does (model_files.py)

    def __init__(
        self,
        sessions: list[Any],
        tokenizer: Any,
        pooling: Pooling,
        fingerprint: str,
        solo: Any | None = None,
        shared: list[Any] | None = None,
    ) -> None:
        self._idle = list(sessions)
        self.solo = solo  # the session with every core's threads, for `embed_lone`
        self._shared = shared or []  # the weights the sessions use: kept alive with them
        self._lock = threading.Lock()
        self._running = 0
        self._tokenizer = tokenizer
        self._inputs = [i.name for i in sessions[0].get_inputs()]
        self.parallelism = len(sessions)
        self._modes = pooling.modes
        self.dimension = pooling.dimension
        self.fingerprint = fingerprint
        model = fingerprint.rpartition("/")[0]
        self.projection = load_projection(model, self.dimension)
        self.token_dimension = token_dimension(self.dimension, self.projection)

    @classmethod
    def load(
        cls, model_dir: Path, onnx_file: Path, fingerprint: str, sessions: int = 1
    ) -> OnnxEncoder:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        check_onnx_modules(model_dir)
        pooling = read_pooling(model_dir)
        if pooling is None:
            raise ValueError(f"{model_dir.name}: no 1_Pooling/config.json says how it pools")
        prompt = default_prompt(model_dir)
        if prompt and not pooling.include_prompt:
            raise ValueError(f"{model_dir.name}: pooling without its prompt: use the torch backend")
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(max_seq_length(model_dir))
        padding = tokenizer.padding or {}  # keep its pad token, drop any fixed length
        tokenizer.enable_padding(
            pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]")
        )
        if sessions <= 1:  # ONNX Runtime's own threading, as before pools existed
            encoder = cls([_session(ort, onnx_file, None, [])], tokenizer, pooling, fingerprint)
        else:
            shared = _shared_weights(ort, onnx_file)
            single = [_session(ort, onnx_file, 1, shared) for _ in range(sessions)]
            solo = _session(ort, onnx_file, sessions, shared)
            encoder = cls(single, tokenizer, pooling, fingerprint, solo, shared)
        encoder.prompt = prompt
        return encoder

    def encode(self, texts: list[str]) -> list[list[float]]:
        return self._run(texts, lone=False, tokens=False)[0]

    def embed(self, texts: list[str], *, tokens: Wanted = False) -> list[Embedding]:
        return self._embed(texts, lone=False, tokens=tokens)

    def embed_lone(self, texts: list[str], *, tokens: Wanted = False) -> list[Embedding]:
        """`embed` on the session with every core's threads, when nothing else runs."""
        return self._embed(texts, lone=True, tokens=tokens)

    def _embed(self, texts: list[str], *, lone: bool, tokens: Wanted) -> list[Embedding]:
        vectors, found = self._run(texts, lone=lone, tokens=tokens)
        return [Embedding(vector, rows) for vector, rows in zip(vectors, found, strict=True)]

    def _run(
        self, texts: list[str], *, lone: bool, tokens: Wanted
    ) -> tuple[list[list[float]], list[TokenVectors | None]]:
        """The sentence vectors; where `tokens` asks, each text's token vectors from the same
        run, computed for those texts only (none when pooled in several modes: they are not
        the sentence vector's size)."""
        if self.prompt:
            texts = [self.prompt + text for text in texts]
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encoded], dtype=np.int64)
        session = self._take(lone)
        try:
            hidden = session.run(None, feeds)[0]
        finally:
            self._give(session)
        pooled = pool(hidden, mask, self._modes)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        vectors: list[list[float]] = (pooled / norms).tolist()
        wanted = wanted_tokens(tokens, len(texts))
        found: list[TokenVectors | None] = [None] * len(texts)
        if not any(wanted) or hidden.shape[2] != self.dimension:
            return vectors, found
        special = np.array([e.special_tokens_mask for e in encoded], dtype=np.int64)
        keep = mask * (1 - special)
        if all(wanted):
            return vectors, list(token_rows(hidden, keep, ids, self.projection))
        chosen = [n for n, want in enumerate(wanted) if want]
        rows = token_rows(hidden[chosen], keep[chosen], ids[chosen], self.projection)
        for n, kept in zip(chosen, rows, strict=True):
            found[n] = kept
        return vectors, found

    def _take(self, lone: bool) -> Any:
        with self._lock:
            self._running += 1
            if lone and self._running == 1 and self.solo is not None:
                return self.solo
            if not self._idle:  # more callers than `parallelism`: a caller's mistake
                self._running -= 1
                raise RuntimeError("more concurrent encodes than sessions")
            return self._idle.pop()

    def _give(self, session: Any) -> None:
        with self._lock:
            self._running -= 1
            if session is not self.solo:
                self._idle.append(session)


def _session(ort: Any, onnx_file: Path, threads: int | None, shared: list[Any]) -> Any:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # warnings would break "one line on stderr"
    if threads is not None:
        options.intra_op_num_threads = threads
    # a session's threads spin between its parallel steps (a lone text is quicker for it)
    # but stop when its run ends, not spin on and take a core from the next request
    options.add_session_config_entry("session.force_spinning_stop", "1")
    for name, _, value in shared:
        options.add_initializer(name, value)
    return ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])


def _shared_weights(ort: Any, onnx_file: Path) -> list[Any]:
    """Every initializer of the model as (name, array, OrtValue on that array): sessions
    given these use the one buffer instead of loading a copy each (none: a copy each)."""
    found = read_initializers(onnx_file) or []
    return [(name, array, ort.OrtValue.ortvalue_from_numpy(array)) for name, array in found]
