"""The lines of OpenClaw's files as we write them: one ``TypedDict`` per entry type (pure).

Pi's ``SessionManager`` (version 3) writes a header, then ``message`` and ``compaction`` entries
chained by ``parentId`` (docs/openclaw-behaviour.md §1.1 B); ``sessions.json`` maps each session key
to a ``SessionEntry`` (§1.1 A). The keys marked "ours" are ignored by Pi and read back by our
importer. Open values (a message's ``content`` and ``details``, a model's ``usage``) stay
``object`` or `providers.json_types.JSONObject`: their shape is the model's, not ours.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from providers.json_types import JSONObject


class SessionHeader(TypedDict):
    type: Literal["session"]
    version: int
    id: str
    timestamp: str
    cwd: str
    exportedBy: str  # ours: tells our importer that silent entries are marked


class PiMessage(TypedDict):
    """Pi's ``AgentMessage`` (pi-ai types) with a numeric ms ``timestamp``; fields by role."""

    role: str
    content: object
    customType: NotRequired[str]
    display: NotRequired[bool]
    api: NotRequired[str]
    provider: NotRequired[str]
    model: NotRequired[str]
    usage: NotRequired[JSONObject]
    stopReason: NotRequired[str]
    errorMessage: NotRequired[str]
    toolCallId: NotRequired[str]
    toolName: NotRequired[str]
    isError: NotRequired[bool]
    details: NotRequired[object]
    timestamp: NotRequired[int]


class MessageLine(TypedDict):
    type: Literal["message"]
    id: str
    parentId: str | None
    timestamp: str
    message: PiMessage
    silent: NotRequired[bool]  # ours
    flushTurn: NotRequired[bool]  # ours: a memory-flush turn, never in the model's context


class CompactionLine(TypedDict):
    type: Literal["compaction"]
    id: str
    parentId: str | None
    timestamp: str
    summary: str
    firstKeptEntryId: str
    tokensBefore: int
    details: object
    fromHook: bool
    trigger: str  # ours, like tokensAfter and offline
    tokensAfter: NotRequired[int]
    offline: NotRequired[bool]


class SessionStoreEntry(TypedDict):
    """One value of ``sessions.json``: the OpenClaw ``SessionEntry`` fields we know."""

    sessionId: str
    sessionFile: str
    updatedAt: int
    sessionStartedAt: int
    totalTokensFresh: bool
    compactionCount: int
    contextTokens: int
    label: NotRequired[str]
    totalTokens: NotRequired[int]
    memoryFlushAt: NotRequired[int]
    memoryFlushCompactionCount: NotRequired[int]
    model: NotRequired[str]
    modelProvider: NotRequired[str]
    inputTokens: NotRequired[int | float]
    outputTokens: NotRequired[int | float]
    cacheRead: NotRequired[int | float]
    cacheWrite: NotRequired[int | float]


class AssistantFile(TypedDict):
    """``assistant.json``: what an import needs to recreate the assistant."""

    slug: str
    name: str
    model: str
    context_window: int
    system_prompt: str
    timezone: str
    workspace_access: str
    settings: object
