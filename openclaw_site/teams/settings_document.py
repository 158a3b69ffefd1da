"""The stored settings document's shape: one ``TypedDict`` per section of `assistant_settings.SCHEMA` (pure).

A document `validate_settings` returned is complete (every default filled) and each value has
passed its `Field`, so these types hold for it; what a user sends before that is open JSON. The
keys are OpenClaw's (docs/openclaw-behaviour.md §1.3, §2.1, §3.1, §4.1); ``lambda`` is a Python
keyword, hence the functional form of `MmrDocument`.
"""

from __future__ import annotations

from typing import Literal, TypedDict

CompactionMode = Literal["safeguard", "default"]
IdentifierPolicy = Literal["strict", "off", "custom"]
PruningMode = Literal["cache-ttl", "always", "off"]
SnippetMode = Literal["head", "best"]
CitationsMode = Literal["auto", "on", "off"]


class QualityGuardDocument(TypedDict):
    enabled: bool
    maxRetries: int


class MemoryFlushDocument(TypedDict):
    enabled: bool
    softThresholdTokens: int
    forceFlushTranscriptBytes: int | str
    prompt: str | None
    systemPrompt: str | None


class CompactionDocument(TypedDict):
    mode: CompactionMode
    reserveTokens: int
    reserveTokensFloor: int
    keepRecentTokens: int
    maxHistoryShare: float
    recentTurnsPreserve: int
    identifierPolicy: IdentifierPolicy
    identifierInstructions: str | None
    customInstructions: str | None
    qualityGuard: QualityGuardDocument
    model: str | None
    timeoutSeconds: int
    memoryFlush: MemoryFlushDocument


class SoftTrimDocument(TypedDict):
    maxChars: int
    headChars: int
    tailChars: int


class HardClearDocument(TypedDict):
    enabled: bool
    placeholder: str


class ToolsDocument(TypedDict):
    allow: list[str]
    deny: list[str]


class ContextPruningDocument(TypedDict):
    mode: PruningMode
    ttl: str | int
    keepLastAssistants: int
    softTrimRatio: float
    hardClearRatio: float
    minPrunableToolChars: int
    softTrim: SoftTrimDocument
    hardClear: HardClearDocument
    tools: ToolsDocument


class SessionChunkingDocument(TypedDict):
    tokens: int | None
    overlap: int | None


class ChunkingDocument(TypedDict):
    tokens: int
    overlap: int
    sessions: SessionChunkingDocument


class SessionSyncDocument(TypedDict):
    deltaBytes: int
    deltaMessages: int
    postCompactionForce: bool


class SyncDocument(TypedDict):
    watchDebounceMs: int
    sessions: SessionSyncDocument


MmrDocument = TypedDict("MmrDocument", {"enabled": bool, "lambda": float})


class TemporalDecayDocument(TypedDict):
    enabled: bool
    halfLifeDays: float


class HybridDocument(TypedDict):
    enabled: bool
    vectorWeight: float
    textWeight: float
    candidateMultiplier: int
    cjkTextWeightScale: float
    mmr: MmrDocument
    temporalDecay: TemporalDecayDocument


class QueryDocument(TypedDict):
    maxResults: int
    minScore: float
    snippetMaxChars: int
    snippetMode: SnippetMode
    hybrid: HybridDocument


class CacheDocument(TypedDict):
    enabled: bool
    maxEntries: int | None


class MemorySearchDocument(TypedDict):
    enabled: bool
    sources: list[str]
    chunking: ChunkingDocument
    sync: SyncDocument
    query: QueryDocument
    cache: CacheDocument
    citations: CitationsMode


class ConsolidationDocument(TypedDict):
    schedule: str
    hour: int
    autoApply: list[str]


class SettingsDocument(TypedDict):
    """``Assistant.settings`` as `validate_settings` returns it."""

    compaction: CompactionDocument
    contextPruning: ContextPruningDocument
    memorySearch: MemorySearchDocument
    memoryConsolidation: ConsolidationDocument
