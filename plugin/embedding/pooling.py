"""Token vectors into one sentence vector, as sentence-transformers' Pooling module does.

The ONNX backends run the model's Transformer only; this pools in numpy, mode for mode, so
the vectors are torch's (tests/embedding/test_own_model.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
