"""Small sentence-transformers models made on the spot: random weights, no download.

Why: bringing one's own model (MEMORY_PLUGIN_EMBEDDING_MODEL) must work on the ONNX
backends for what sentence-transformers 6 saves and for what earlier releases saved.
`save_model` makes a one-layer BERT with a vocabulary of letters, saves it with the
installed sentence-transformers (the format of 6), and rewrites its configuration files
the way sentence-transformers 2 to 5 wrote them when asked for the `legacy` format.
"""

from __future__ import annotations

import json
from pathlib import Path

# Letters and their word-piece continuations: every lower-case word tokenizes.
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *LETTERS, *(f"##{c}" for c in LETTERS)]
HIDDEN = 32
MAX_SEQ_LENGTH = 24  # well under the 64 positions: texts past it are truncated alike
LEGACY_KEYS = {
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean": "pooling_mode_mean_tokens",
    "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
    "weightedmean": "pooling_mode_weightedmean_tokens",
    "lasttoken": "pooling_mode_lasttoken",
}


def save_transformer(directory: Path) -> Path:
    """A random one-layer BERT and its tokenizer, saved with transformers."""
    import torch
    from transformers import BertConfig
    from transformers import BertModel
    from transformers import BertTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(directory / "vocab.txt"))
    torch.manual_seed(29)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=HIDDEN,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def save_model(transformer: Path, target: Path, modes: tuple[str, ...], legacy: bool) -> Path:
    """A sentence-transformers model (Transformer, Pooling by `modes`, Normalize) at `target`."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize
    from sentence_transformers.sentence_transformer.modules import Pooling
    from sentence_transformers.sentence_transformer.modules import Transformer

    inner = Transformer(str(transformer), max_seq_length=MAX_SEQ_LENGTH)
    pooling = Pooling(HIDDEN, pooling_mode=modes[0] if len(modes) == 1 else modes)
    SentenceTransformer(modules=[inner, pooling, Normalize()]).save(str(target))
    saved = json.loads((target / "1_Pooling" / "config.json").read_text())
    assert saved["embedding_dimension"] == HIDDEN  # what sentence-transformers 6 writes
    if legacy:
        write_legacy_config(target, modes)
    return target


def write_legacy_config(target: Path, modes: tuple[str, ...]) -> None:
    """The files as sentence-transformers before 6 wrote them."""
    pooling = {"word_embedding_dimension": HIDDEN}
    pooling |= {key: mode in modes for mode, key in LEGACY_KEYS.items()}
    (target / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    bert = {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False}
    (target / "sentence_bert_config.json").write_text(json.dumps(bert))
    tokenizer_config = json.loads((target / "tokenizer_config.json").read_text())
    tokenizer_config["model_max_length"] = 512  # the limit is sentence_bert_config's here
    (target / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    modules = json.loads((target / "modules.json").read_text())
    for module in modules:
        kind = module["type"].rsplit(".", 1)[-1]
        module["type"] = f"sentence_transformers.models.{kind}"
    (target / "modules.json").write_text(json.dumps(modules))
