"""An assistant's `memorySearch` settings, complete, plus the index fingerprint they imply."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, replace
from typing import Any

from memory_app.chunking import DEFAULT_CHUNK_TOKENS, effective_chunk_tokens
from memory_app.models import FTS_ONLY_MODEL, Source
from openclaw_site.assistant_settings import SettingsError, default_settings, validate_settings
from openclaw_site.models import Assistant
from providers.embeddings import Embedder

logger = logging.getLogger(__name__)

# Bump when the stored rows change meaning (chunk text, tsvector input): forces a full reindex.
INDEX_FORMAT_VERSION = 1


def memory_search_settings(assistant: Assistant) -> dict[str, Any]:
    """Return the assistant's complete `memorySearch` settings (defaults for anything missing)."""
    try:
        return validate_settings(assistant.settings or {})["memorySearch"]
    except SettingsError as error:
        # Stored settings were validated on write; a document saved before a schema change must
        # not break search, so fall back to the defaults and say so in the log.
        logger.warning("assistant %s has invalid settings (%s); using defaults", assistant.pk, error)
        return copy.deepcopy(default_settings()["memorySearch"])


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


def configured_chunking(settings: dict[str, Any], source: str) -> Chunking:
    """Return the configured chunk tokens/overlap for a source (sessions may override)."""
    chunking = settings["chunking"]
    tokens, overlap = chunking["tokens"], chunking["overlap"]
    if source == Source.SESSIONS:
        override = chunking.get("sessions") or {}
        tokens = override.get("tokens") or tokens
        overlap = override.get("overlap") if override.get("overlap") is not None else overlap
    return Chunking(tokens, min(overlap, tokens - 1))


def effective_chunking(configured: Chunking, embedder: Embedder | None) -> Chunking:
    """Clamp the chunk size to what the embedder reads (docs/design.md §D9), overlap in proportion.

    With MiniLM a 400/80 setting becomes 127 tokens; keeping 80 tokens of overlap would repeat
    two thirds of every chunk in the next one, so the overlap keeps its configured share.
    """
    max_input = embedder.max_input_tokens if embedder is not None else None
    tokens = effective_chunk_tokens(configured.tokens, max_input)
    if tokens == configured.tokens:
        return configured
    overlap = round(configured.overlap * tokens / configured.tokens)
    return Chunking(tokens, min(overlap, tokens - 1))


def chunking_for(settings: dict[str, Any], source: str, embedder: Embedder | None) -> Chunking:
    chunking = effective_chunking(configured_chunking(settings, source), embedder)
    if source != Source.SESSIONS:
        return chunking
    # A message is kept whole up to what the embedder reads (OpenClaw's chunk size at most).
    max_input = embedder.max_input_tokens if embedder is not None else None
    line_tokens = effective_chunk_tokens(max(DEFAULT_CHUNK_TOKENS, chunking.tokens), max_input)
    return replace(chunking, max_line_tokens=max(chunking.tokens, line_tokens))


def fingerprint(assistant: Assistant, embedder: Embedder | None) -> dict[str, Any]:
    """Return what the index rows depend on; any change means a full reindex (docs/design.md §D8)."""
    settings = memory_search_settings(assistant)
    chunks = {source: chunking_for(settings, source, embedder).as_dict() for source in Source.values}
    if embedder is None:
        identity = {"provider": "none", "providerKey": "none", "model": FTS_ONLY_MODEL, "dims": 0}
    else:
        identity = {
            "provider": embedder.provider,
            "providerKey": embedder.provider_key,
            "model": embedder.model,
            "dims": embedder.dims,
        }
    sources = sorted(set(settings["sources"]) & set(Source.values))
    return {"version": INDEX_FORMAT_VERSION, **identity, "sources": sources, "chunking": chunks}


def indexed_sources(assistant: Assistant) -> list[str]:
    """Return the sources the assistant indexes and searches (`memorySearch.sources`)."""
    return sorted(set(memory_search_settings(assistant)["sources"]) & set(Source.values))
