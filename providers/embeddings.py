"""Embedders: the `Embedder` protocol and the backend chosen in settings (cached).

`EMBEDDING_BACKEND` names a class by dotted path, as Django's `EMAIL_BACKEND` does; its
`from_settings()` classmethod returns the embedder, or None for text-only search. Empty (the
default), the class follows from `EMBEDDING_PROVIDER` like OpenClaw's auto order
(docs/openclaw-behaviour.md §4.5): local first, then the remote endpoint, else None and memory
search runs on full-text alone. The local model is `EMBEDDING_LOCAL_MODEL`: multilingual-e5-small
(the default, docs/dependencies.md) or all-MiniLM-L6-v2.

Queries and documents are embedded apart (`embed_queries`, `embed_documents`): retrieval models
such as e5 are trained with a different prefix on each side (docs/design.md §D14). Search asks
for a query's vector through `cached_query_vector`, which keeps the latest queries' vectors per embedder
identity: users and agents repeat queries, and a local query embedding is the largest CPU cost
of a search (docs/design.md, Search latency).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from django.conf import settings
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

# The classes `EMBEDDING_PROVIDER` and `EMBEDDING_LOCAL_MODEL` stand for; imported when chosen, so
# a server that does not use torch (or the OpenAI client) never loads it.
PROVIDER_BACKENDS = {"openai": "providers.openai_embeddings.OpenAIEmbedder"}
LOCAL_BACKENDS = {
    "multilingual-e5-small": "providers.e5_embeddings.E5Embedder",
    "all-MiniLM-L6-v2": "providers.local_embeddings.MiniLMEmbedder",
}
# OpenClaw `EMBEDDING_BATCH_MAX_TOKENS`: one request carries at most 8000 UTF-8 bytes of input.
EMBEDDING_BATCH_MAX_BYTES = 8000


class Embedder(Protocol):
    """Turns search queries and stored documents into vectors of `dims` floats."""

    provider: str
    provider_key: str
    model: str
    dims: int
    max_input_tokens: int | None

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_queries(self, texts: list[str]) -> list[list[float]]: ...


@dataclass(frozen=True)
class DocumentVectors:
    """The vectors of stored texts and the input tokens the embedder counted for them.

    ``tokens`` is None when the embedder gives no count (the caller then estimates).
    """

    vectors: list[list[float]]
    tokens: int | None = None


def embed_documents_counted(embedder: Embedder, texts: list[str]) -> DocumentVectors:
    """Embed stored texts and return their vectors with the tokens the embedder says it read.

    An embedder that can count its input (e5 by its own tokenizer, an OpenAI-compatible endpoint
    by the response's `usage`) has a method of this name; any other gives vectors alone, so
    usage records stay truthful without every embedder knowing about them.
    """
    counted = getattr(embedder, "embed_documents_counted", None)
    if counted is not None:
        vectors: DocumentVectors = counted(texts)
        return vectors
    return DocumentVectors(embedder.embed_documents(texts))


class _ProviderIdentity(TypedDict, total=False):
    provider: str
    baseUrl: str
    model: str
    dims: int
    inputs: dict[str, str]


def make_provider_key(
    *, provider: str, base_url: str, model: str, dims: int, inputs: dict[str, str] | None = None
) -> str:
    """Return sha256 of the provider's identity, stable across restarts (docs/design.md §D8).

    ``inputs`` is how texts are marked as queries or documents (prefixes, input types): vectors
    made another way are not comparable, so a change rebuilds the index.
    """
    identity: _ProviderIdentity = {"provider": provider, "baseUrl": base_url, "model": model, "dims": dims}
    if inputs:
        identity["inputs"] = inputs
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()


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


# --- query vectors, cached ----------------------------------------------------------------------

# Vectors kept per process: float32 (what pgvector stores), 1.5 KB each at 384 dimensions.
QUERY_CACHE_SIZE = 1024
_query_cache: OrderedDict[tuple[str, str], array[float]] = OrderedDict()
_query_cache_lock = threading.Lock()


def cached_query_vector(embedder: Embedder, text: str) -> list[float]:
    """Return the vector of a search query, from the cache when this embedder embedded it lately.

    The key is the embedder's identity (`provider_key`: provider, endpoint, model, dimensions,
    query prefix), so another model or prefix never answers from the cache. A miss embeds outside
    the lock; a failure is not remembered.
    """
    key = (embedder.provider_key, text)
    with _query_cache_lock:
        cached = _query_cache.get(key)
        if cached is not None:
            _query_cache.move_to_end(key)
            return cached.tolist()
    vector = array("f", embedder.embed_queries([text])[0])
    with _query_cache_lock:
        _query_cache[key] = vector
        _query_cache.move_to_end(key)
        while len(_query_cache) > QUERY_CACHE_SIZE:
            _query_cache.popitem(last=False)
    return vector.tolist()


def clear_query_cache() -> None:
    with _query_cache_lock:
        _query_cache.clear()


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
        embedder: Embedder | None = _embedder
        return embedder


class EmbedderStatus(TypedDict):
    """The embedder as /healthz reports it (`embedder_status`)."""

    loaded: bool
    checked: bool
    ready: bool
    preloading: bool
    provider: str | None
    model: str | None
    dims: int | None
    error: str | None


def embedder_status(*, load: bool = False) -> EmbedderStatus:
    """Describe the embedder for /healthz without loading a model unless ``load`` is true.

    ``ready``: the embedder was built and, if local, has embedded a first text (the preload is
    done); ``preloading``: the start-up thread is still at it.
    """
    embedder = get_embedder() if load else (None if _embedder is _UNSET else _embedder)
    return {
        "loaded": embedder is not None,
        "checked": load or _embedder is not _UNSET,
        "ready": _ready.is_set() or (load and embedder is None),
        "preloading": _preload_thread is not None and _preload_thread.is_alive(),
        "provider": getattr(embedder, "provider", None),
        "model": getattr(embedder, "model", None),
        "dims": getattr(embedder, "dims", None) if embedder is not None else None,
        "error": _embedder_error,
    }


def reset_embedders() -> None:
    """Forget the cached embedder and query vectors (tests change settings); the loaded model stays
    in memory."""
    global _embedder, _embedder_error, _preload_thread
    with _embedder_lock:
        _embedder, _embedder_error = _UNSET, None
        _preload_thread = None
        _ready.clear()
    clear_query_cache()


# --- preloading at process start -------------------------------------------------------------

_ready = threading.Event()
_preload_thread: threading.Thread | None = None
_preload_lock = threading.Lock()


def preload_embedder() -> threading.Thread:
    """Build the configured embedder in a background thread, once per process.

    The web process (config/wsgi.py, asgi.py) and each task worker (django-q2's
    `post_spawn`, memory_app/index/receivers.py) call this at start, so the first search does not wait
    for a model to load; /healthz reports ``ready`` when it is done.
    """
    global _preload_thread
    with _preload_lock:
        if _preload_thread is None:
            _preload_thread = threading.Thread(target=_preload, name="embedder-preload", daemon=True)
            _preload_thread.start()
        return _preload_thread


def _preload() -> None:
    try:
        embedder = get_embedder()
        if embedder is not None and embedder.provider == "local":
            # The first text pages the weights in and warms the engine; a remote endpoint is
            # not called at start (it may bill, or not be up yet).
            embedder.embed_queries(["warm-up"])
    except Exception:  # a failed preload leaves search to try (and report) on first use
        logger.exception("preloading the embedder failed")
    finally:
        _ready.set()


def _build_embedder() -> Embedder | None:
    if settings.EMBEDDING_BACKEND:
        return _from_settings(settings.EMBEDDING_BACKEND)
    choice = settings.EMBEDDING_PROVIDER  # one of auto, local, openai, none (settings.py checks)
    if choice == "none":
        return None
    if choice == "openai":
        return _from_settings(PROVIDER_BACKENDS["openai"])
    local = _try_local()
    if local is not None or choice == "local":
        return local
    # Auto: like OpenClaw, a failing local provider falls through to the remote one.
    if not settings.EMBEDDING_BASE_URL:
        return None
    return _from_settings(PROVIDER_BACKENDS["openai"])


def _try_local() -> Embedder | None:
    global _embedder_error
    try:
        return _from_settings(LOCAL_BACKENDS[settings.EMBEDDING_LOCAL_MODEL])
    except Exception as exc:  # any failure (missing torch, files) means "no local"
        _embedder_error = f"local embedder unavailable: {exc}"
        logger.warning("%s", _embedder_error)
        return None


def _from_settings(dotted_path: str) -> Embedder | None:
    embedder: Embedder | None = import_string(dotted_path).from_settings()
    return embedder
