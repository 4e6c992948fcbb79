"""Keyword vectors: BM25 term weights of a memory's content, with Qdrant's own encoder.

They find the names, places, dates and identifiers a small sentence model blurs; the store applies
the IDF (docs/backends.md, "Hybrid search"). The embedded store makes them in its engine worker
(`VectorBackend.makes_keywords`); for the other stores the plugin makes them. The engine's library
is loaded at the first vector made, so a server whose store makes its own never loads it.
"""

from __future__ import annotations

from functools import cached_property
from importlib import metadata
from typing import Any

from adapters.values import SparseVector

K1 = 1.2
B = 0.75
AVG_LEN = 256.0
LANGUAGE = "english"
# Tokenising runs on the event loop at a cost linear in the text: only a content's first
# 32 KiB are indexed (the whole is stored and returned), as the model reads only its beginning.
MAX_KEYWORD_CHARS = 32_768


class KeywordEncoder:
    """Text to BM25 keyword vectors; cheap (microseconds), safe on the event loop."""

    def __init__(
        self, *, k1: float = K1, b: float = B, avg_len: float = AVG_LEN, language: str = LANGUAGE
    ) -> None:
        self._config = (k1, b, avg_len, language)
        version = metadata.version("qdrant-edge-py")
        self.identity = (
            f"bm25/word/{language}/k1={k1:g}/b={b:g}/avg_len={avg_len:g}/qdrant-edge-{version}"
        )

    @cached_property
    def _bm25(self) -> Any:
        import qdrant_edge as qe

        k1, b, avg_len, language = self._config
        return qe.Bm25(qe.Bm25Config(k=k1, b=b, avg_len=avg_len, language=language))

    def document(self, text: str) -> SparseVector:
        """The keyword vector stored with a memory whose content is `text`."""
        return plain(self._bm25.embed_document(text[:MAX_KEYWORD_CHARS]))

    def query(self, text: str) -> SparseVector:
        """The keyword vector of a search's query text."""
        return plain(self._bm25.embed_query(text[:MAX_KEYWORD_CHARS]))


def plain(vector: Any) -> SparseVector:
    """The engine's sparse vector as a `SparseVector`."""
    return SparseVector(tuple(vector.indices), tuple(vector.values))
