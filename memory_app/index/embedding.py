"""Embedding chunks through the cache: only text hashes missing from `EmbeddingCache` are embedded, within a time budget, and the usage recorded (docs/openclaw-behaviour.md §4.4)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from memory_app.index.entries import Piece, ProgressCallback
from memory_app.models import (
    EmbeddingCache,
    IndexState,
)
from memory_app.tokens import estimate_text_tokens
from openclaw_site.models import Assistant, UsagePurpose
from openclaw_site.usage.ledger import record_usage
from providers.chat import Usage
from providers.embeddings import Embedder, embed_documents_counted
from providers.errors import ProviderError

logger = logging.getLogger(__name__)


# docs/openclaw-behaviour.md §4.4: the cache is read in batches of 400 hashes.
CACHE_LOOKUP_BATCH = 400


@dataclass
class _Vectors:
    by_hash: dict[str, list[float]]
    embedded: int = 0
    cache_hits: int = 0
    error: str | None = None
    tokens: int = 0  # the embedder's count of its input, else the estimate

    def add(self, other: _Vectors) -> None:
        """Take in another call's vectors and counts (its error too)."""
        self.by_hash.update(other.by_hash)
        self.embedded += other.embedded
        self.cache_hits += other.cache_hits
        self.tokens += other.tokens
        self.error = self.error or other.error


def embed_with_cache(
    embedder: Embedder | None, texts_by_hash: dict[str, str], *, progress: ProgressCallback | None = None
) -> _Vectors:
    """Return vectors for the texts, embedding only those the cache lacks (docs/openclaw-behaviour.md §4.4)."""
    if embedder is None or not texts_by_hash:
        return _Vectors({})
    found = _cached(embedder, list(texts_by_hash))
    result = _Vectors(dict(found), cache_hits=len(found))
    result.add(
        _embed_uncached(
            embedder, {h: t for h, t in texts_by_hash.items() if h not in found}, progress=progress
        )
    )
    return result


def _embed_uncached(
    embedder: Embedder, texts_by_hash: dict[str, str], *, progress: ProgressCallback | None = None
) -> _Vectors:
    """Embed the texts (known to be missing from the cache) and store their vectors there."""
    result = _Vectors({})
    # By length: a batch of texts of about the same length pads least (what sentence-transformers
    # does within one call, here across calls).
    missing = sorted(texts_by_hash, key=lambda h: len(texts_by_hash[h]))
    # Texts per embed_documents() call (EMBEDDING_BATCH_SIZE): the provider batches further inside.
    size = settings.EMBEDDING_BATCH_SIZE
    for start in range(0, len(missing), size):
        group = missing[start : start + size]
        texts = [texts_by_hash[h] for h in group]
        try:
            counted = embed_documents_counted(embedder, texts)
        except ProviderError as error:
            result.error = error.message
            logger.warning(
                "embedding failed; %d chunks stored for full-text only: %s", len(missing) - start, error
            )
            break
        _store_cache(embedder, group, counted.vectors)
        result.by_hash.update(zip(group, counted.vectors))
        result.embedded += len(group)
        result.tokens += (
            counted.tokens if counted.tokens is not None else sum(estimate_text_tokens(t) for t in texts)
        )
        if progress is not None:
            progress({"embedded": result.embedded, "to_embed": len(missing)})
    return result


def embed_within(embedder: Embedder, pieces: Sequence[Piece], budget_seconds: float) -> tuple[_Vectors, int]:
    """Embed ``pieces`` from the first on for about ``budget_seconds``; return the vectors and
    how many pieces they leave without one (none after an embedding error: the rest is stored for
    full text only, as a whole pass does).

    Vectors already in the cache cost no budget (a run re-cuts chunks an earlier one embedded).
    The first call embeds one missing piece; each next call as many as the speed measured so far
    fits in the time left (up to `EMBEDDING_BATCH_SIZE`), so a slow local model overruns the
    budget by about one piece and a fast remote one still sends full batches.
    """
    found = _cached(embedder, [p.chunk.hash for p in pieces])
    result = _Vectors(found, cache_hits=len(found))
    missing = list({p.chunk.hash: p for p in pieces if p.chunk.hash not in found}.values())  # one per text
    started = time.monotonic()
    done, size = 0, 1
    while done < len(missing):
        group = missing[done : done + size]
        part = _embed_uncached(embedder, {p.chunk.hash: p.chunk.text for p in group})
        result.add(part)
        done += len(group)
        if part.error is not None:
            return result, 0
        elapsed = time.monotonic() - started
        if elapsed >= budget_seconds:
            break
        per_piece = elapsed / done
        fits = int((budget_seconds - elapsed) / per_piece) if per_piece > 0 else settings.EMBEDDING_BATCH_SIZE
        size = max(1, min(settings.EMBEDDING_BATCH_SIZE, fits))
    return result, len(missing) - done


def record_embedding_usage(assistant: Assistant, embedder: Embedder | None, vectors: _Vectors) -> None:
    if embedder is not None and vectors.embedded:
        record_usage(
            assistant=assistant,
            purpose=UsagePurpose.EMBEDDING,
            model=embedder.model,
            usage=Usage(input=vectors.tokens, total=vectors.tokens),
        )


def note_embedding_error(assistant: Assistant, vectors: _Vectors) -> None:
    if vectors.error:
        IndexState.objects.filter(assistant=assistant).update(last_error=f"embedding failed: {vectors.error}")


def _cached(embedder: Embedder, hashes: list[str]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for start in range(0, len(hashes), CACHE_LOOKUP_BATCH):
        rows = EmbeddingCache.objects.filter(
            provider_key=embedder.provider_key,
            model=embedder.model,
            dims=embedder.dims,
            hash__in=hashes[start : start + CACHE_LOOKUP_BATCH],
        ).values_list("hash", "embedding")
        found.update((h, list(vector)) for h, vector in rows)
    return found


def _store_cache(embedder: Embedder, hashes: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
    rows = [
        EmbeddingCache(
            provider_key=embedder.provider_key,
            model=embedder.model,
            hash=h,
            dims=len(vector),
            embedding=list(vector),
        )
        for h, vector in zip(hashes, vectors)
    ]
    # Two workers may embed the same text at once; the first row wins, both vectors are equal.
    EmbeddingCache.objects.bulk_create(rows, ignore_conflicts=True)
