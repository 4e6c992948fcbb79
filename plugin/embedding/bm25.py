"""Keyword vectors: BM25 term weights of a memory's content, computed by the plugin.

They find the names, places, dates and identifiers a small sentence model blurs; the encoder is
Qdrant's own, and the store applies the IDF (docs/backends.md, "Hybrid search").
"""

from __future__ import annotations

from importlib import metadata

import qdrant_edge as qe

from adapters.values import SparseVector

K1 = 1.2
B = 0.75
AVG_LEN = 256.0
LANGUAGE = "english"
# Tokenising runs on the event loop at a cost linear in the text, so a content of the
# contract's maximum size would hold up every request meanwhile. Its first 32 KiB are
# indexed (the whole content is still stored and returned), as the model reads only
# its beginning.
MAX_KEYWORD_CHARS = 32_768


class KeywordEncoder:
    """Text to BM25 keyword vectors; cheap (microseconds), safe on the event loop."""

    def __init__(
        self, *, k1: float = K1, b: float = B, avg_len: float = AVG_LEN, language: str = LANGUAGE
    ) -> None:
        config = qe.Bm25Config(k=k1, b=b, avg_len=avg_len, language=language)
        self._bm25 = qe.Bm25(config)
        version = metadata.version("qdrant-edge-py")
        self.identity = (
            f"bm25/word/{language}/k1={k1:g}/b={b:g}/avg_len={avg_len:g}/qdrant-edge-{version}"
        )

    def document(self, text: str) -> SparseVector:
        """The keyword vector stored with a memory whose content is `text`."""
        return _plain(self._bm25.embed_document(text[:MAX_KEYWORD_CHARS]))

    def query(self, text: str) -> SparseVector:
        """The keyword vector of a search's query text."""
        return _plain(self._bm25.embed_query(text[:MAX_KEYWORD_CHARS]))


def _plain(vector: qe.SparseVector) -> SparseVector:
    return SparseVector(tuple(vector.indices), tuple(vector.values))
