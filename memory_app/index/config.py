"""The chunking an assistant's `memorySearch` settings imply, and the index fingerprint.

The settings come from the assistant's typed settings (`Assistant.config.memory_search`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from memory_app.index.chunking import DEFAULT_CHUNK_TOKENS, effective_chunk_tokens
from memory_app.models import FTS_ONLY_MODEL, Source
from memory_app.search.calibration import profile_for
from openclaw_site.models import Assistant
from openclaw_site.teams.assistant_settings import MemorySearchSettings
from providers.embeddings import Embedder

# Bump when the stored rows change meaning (chunk text, tsvector input): forces a full reindex.
# 2: the stemmed text search configuration (memory_app.search.textsearch.TS_CONFIG).
INDEX_FORMAT_VERSION = 2


@dataclass(frozen=True)
class Chunking:
    tokens: int
    overlap: int
    # Transcripts: chunks of whole lines (messages); a line is cut only past this many tokens
    # (`chunking.chunk_lines`). None: OpenClaw's `chunk_markdown`.
    max_line_tokens: int | None = None

    def as_dict(self) -> dict[str, int]:
        result = {"tokens": self.tokens, "overlap": self.overlap}
        if self.max_line_tokens is not None:
            result["maxLineTokens"] = self.max_line_tokens
        return result


def configured_chunking(search: MemorySearchSettings, source: str) -> Chunking:
    """Return the configured chunk tokens/overlap for a source (sessions may have their own)."""
    configured = search.session_chunking if source == Source.SESSIONS else search.chunking
    # The settings schema keeps the overlap below the chunk size.
    return Chunking(configured.tokens, configured.overlap)


def effective_chunking(configured: Chunking, embedder: Embedder | None) -> Chunking:
    """Clamp the chunk size to what the embedder reads (docs/design.md §D9), overlap in proportion.

    With MiniLM a 400/80 setting becomes 127 tokens; keeping 80 tokens of overlap would repeat
    two thirds of every chunk in the next one, so the overlap keeps its configured share.
    """
    tokens = _readable_tokens(configured.tokens, embedder)
    if tokens == configured.tokens:
        return configured
    overlap = round(configured.overlap * tokens / configured.tokens)
    return Chunking(tokens, min(overlap, tokens - 1))


def _readable_tokens(configured: int, embedder: Embedder | None) -> int:
    """Return ``configured`` cut to what the embedder reads (its profile's pieces per token)."""
    if embedder is None:
        return effective_chunk_tokens(configured, None)
    return effective_chunk_tokens(
        configured, embedder.max_input_tokens, pieces_per_token=profile_for(embedder.model).pieces_per_token
    )


def chunking_for(search: MemorySearchSettings, source: str, embedder: Embedder | None) -> Chunking:
    """Return the chunking a source is indexed with: configured, fitted to the embedder."""
    chunking = effective_chunking(configured_chunking(search, source), embedder)
    if source != Source.SESSIONS:
        return chunking
    # A message is kept whole up to what the embedder reads (OpenClaw's chunk size at most).
    line_tokens = _readable_tokens(max(DEFAULT_CHUNK_TOKENS, chunking.tokens), embedder)
    return replace(chunking, max_line_tokens=max(chunking.tokens, line_tokens))


def fingerprint(assistant: Assistant, embedder: Embedder | None) -> dict[str, Any]:
    """Return what the index rows depend on; any change means a full reindex (docs/design.md §D8)."""
    search = assistant.config.memory_search
    chunks = {source: chunking_for(search, source, embedder).as_dict() for source in Source.values}
    if embedder is None:
        identity = {"provider": "none", "providerKey": "none", "model": FTS_ONLY_MODEL, "dims": 0}
    else:
        identity = {
            "provider": embedder.provider,
            "providerKey": embedder.provider_key,
            "model": embedder.model,
            "dims": embedder.dims,
        }
    return {
        "version": INDEX_FORMAT_VERSION,
        **identity,
        "sources": indexed_sources(assistant),
        "chunking": chunks,
    }


def indexed_sources(assistant: Assistant) -> list[str]:
    """Return the sources the assistant indexes and searches (`memorySearch.sources`)."""
    return sorted(set(assistant.config.memory_search.sources) & set(Source.values))
