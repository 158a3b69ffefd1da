"""Embedders: the `Embedder` protocol and the backend chosen in settings (cached).

`EMBEDDING_BACKEND` names a class by dotted path, as Django's `EMAIL_BACKEND` does; its
`from_settings()` classmethod returns the embedder, or None for text-only search. Empty (the
default), the class follows from `EMBEDDING_PROVIDER` like OpenClaw's auto order
(docs/openclaw-behaviour.md §4.5): local first, then the remote endpoint, else None and memory
search runs on full-text alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import Any, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

# The classes `EMBEDDING_PROVIDER` stands for; imported when chosen, so a server without torch
# (or without the OpenAI client in use) never loads it.
PROVIDER_BACKENDS = {
    "local": "providers.local_embeddings.LocalEmbedder",
    "openai": "providers.openai_embeddings.OpenAIEmbedder",
}
# OpenClaw `EMBEDDING_BATCH_MAX_TOKENS`: one request carries at most 8000 UTF-8 bytes of input.
EMBEDDING_BATCH_MAX_BYTES = 8000


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
    """Return sha256 of the provider's identity, stable across restarts (docs/design.md §D8)."""
    identity = {"provider": provider, "baseUrl": base_url, "model": model, "dims": dims}
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
        return _embedder


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
        return _from_settings(PROVIDER_BACKENDS["local"])
    except Exception as exc:  # any failure (missing torch, files) means "no local"
        _embedder_error = f"local embedder unavailable: {exc}"
        logger.warning("%s", _embedder_error)
        return None


def _from_settings(dotted_path: str) -> Embedder | None:
    return import_string(dotted_path).from_settings()
