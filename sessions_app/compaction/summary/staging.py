"""Staged summarisation: chunking, the injected model call, rolling and merged summaries, pruning.

Pure module. Reproduces OpenClaw's src/agents/compaction.ts: the adaptive chunk ratio,
`splitMessagesByTokenShare`, chunking by max tokens, `summarizeInStages` with its retry without
oversized messages, and `pruneHistoryForContextShare`. The model call is injected (`SummarizeFn`);
a blank reply raises `SummaryError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from memory_app.tokens import estimate_message_tokens, estimate_messages_tokens
from openclaw_site.teams.assistant_settings import SummarySettings
from sessions_app.compaction.summary.content import Message, drop_orphan_tool_results, tool_call_ids
from sessions_app.compaction.summary.instructions import build_summarization_instructions
from sessions_app.compaction.summary.prompts import DEFAULT_SUMMARY_FALLBACK, MERGE_SUMMARIES_INSTRUCTIONS
from sessions_app.compaction.summary.serialisation import ChatMessages, build_summary_request

SummarizeFn = Callable[[ChatMessages], str]
BASE_CHUNK_RATIO = 0.4
MIN_CHUNK_RATIO = 0.15
SAFETY_MARGIN = 1.2
SUMMARIZATION_OVERHEAD_TOKENS = 4096
DEFAULT_PARTS = 2
MIN_MESSAGES_FOR_SPLIT = 4


# --- Chunking (src/agents/compaction.ts) ---


def compute_adaptive_chunk_ratio(messages: Sequence[Message], context_window: int) -> float:
    """Shrink the chunk ratio from 0.4 towards 0.15 when messages are large."""
    if not messages:
        return BASE_CHUNK_RATIO
    average = estimate_messages_tokens(messages) / len(messages) * SAFETY_MARGIN / context_window
    if average > 0.1:
        reduction = min(average * 2, BASE_CHUNK_RATIO - MIN_CHUNK_RATIO)
        return max(MIN_CHUNK_RATIO, BASE_CHUNK_RATIO - reduction)
    return BASE_CHUNK_RATIO


def max_chunk_tokens(messages: Sequence[Message], context_window: int) -> int:
    """Return `max(1, floor(window * ratio) - 4096)` (docs/openclaw-behaviour.md §1.7 step 8)."""
    ratio = compute_adaptive_chunk_ratio(messages, context_window)
    return max(1, math.floor(context_window * ratio) - SUMMARIZATION_OVERHEAD_TOKENS)


def split_messages_by_token_share(
    messages: Sequence[Message], parts: int = DEFAULT_PARTS
) -> list[list[Message]]:
    """Split into `parts` token-share chunks, never inside a pending tool-call batch."""
    if not messages:
        return []
    parts = min(max(1, parts), len(messages))
    if parts <= 1:
        return [list(messages)]
    splitter = _TokenShareSplitter(parts, estimate_messages_tokens(messages) / parts)
    for message in messages:
        splitter.add(message)
    return splitter.finish()


class _TokenShareSplitter:
    """State machine of OpenClaw's `splitMessagesByTokenShare`."""

    def __init__(self, parts: int, target: float) -> None:
        self.parts, self.target = parts, target
        self.chunks: list[list[Message]] = []
        self.current: list[Message] = []
        self.tokens = 0
        self.pending: set[str] = set()
        self.pending_start: int | None = None

    def _can_split(self) -> bool:
        """Tell whether another chunk may still be closed (the last one takes the rest)."""
        return len(self.chunks) < self.parts - 1

    def add(self, message: Message) -> None:
        """Append one message, closing the chunk first when the target would be crossed."""
        tokens = estimate_message_tokens(message)
        crossing = self.current and self.tokens + tokens > self.target
        if not self.pending and self._can_split() and crossing:
            self.chunks.append(self.current)
            self.current, self.tokens, self.pending_start = [], 0, None
        self.current.append(message)
        self.tokens += tokens
        if message.get("role") == "assistant":
            self._open_batch(message)
        elif message.get("role") == "toolResult" and self.pending:
            self._close_result(message)

    def _open_batch(self, message: Message) -> None:
        """Track the tool calls an assistant opens; they must close before a split."""
        # Aborted/error assistants never get results, so they must not hold a split open.
        ids = [] if message.get("stopReason") in ("aborted", "error") else tool_call_ids(message)
        self.pending = set(ids)
        self.pending_start = len(self.current) - 1 if ids else None

    def _close_result(self, message: Message) -> None:
        """Mark a tool result's call answered; split if the batch crossed the target."""
        call_id = message.get("toolCallId")
        if not call_id:
            self.pending, self.pending_start = set(), None
        else:
            self.pending.discard(str(call_id))
        if not self.pending and self._can_split() and self.tokens > self.target:
            # The target was crossed inside the batch: split before the assistant that opened it.
            self._split_at_pending_start()
            self.pending_start = None

    def _split_at_pending_start(self) -> None:
        """Close the chunk just before the assistant that opened the current batch."""
        start = self.pending_start
        if start is None or start <= 0 or not self._can_split():
            return
        self.chunks.append(self.current[:start])
        self.current = self.current[start:]
        self.tokens = estimate_messages_tokens(self.current)
        self.pending_start = 0

    def finish(self) -> list[list[Message]]:
        """Close the last chunk and return all chunks."""
        if self.pending and self.tokens > self.target:
            self._split_at_pending_start()
        if self.current:
            self.chunks.append(self.current)
        return self.chunks


def chunk_messages_by_max_tokens(messages: Sequence[Message], max_tokens: int) -> list[list[Message]]:
    """Chunk sequentially under `max_tokens / 1.2`; an oversized message is its own chunk."""
    effective = max(1, math.floor(max_tokens / SAFETY_MARGIN))
    chunks: list[list[Message]] = []
    current: list[Message] = []
    current_tokens = 0
    for message in messages:
        tokens = estimate_message_tokens(message)
        if current and current_tokens + tokens > effective:
            chunks.append(current)
            current, current_tokens = [], 0
        current.append(message)
        current_tokens += tokens
        if tokens > effective:
            chunks.append(current)
            current, current_tokens = [], 0
    if current:
        chunks.append(current)
    return chunks


# --- Staged summarisation (src/agents/compaction.ts `summarizeInStages`) ---


class SummaryError(RuntimeError):
    """The summariser produced no usable summary; the caller must write nothing."""


class SummaryClient:
    """The injected model call with the settings it runs under; counts calls, rejects blanks."""

    def __init__(self, summarize: SummarizeFn, settings: SummarySettings, context_window: int) -> None:
        self.summarize, self.settings, self.context_window = summarize, settings, context_window
        self.calls = 0

    def request(self, messages: Sequence[Message], previous: str | None, custom: str) -> str:
        """Run one `generateSummary` request and return its non-empty text."""
        instructions = build_summarization_instructions(custom, self.settings)
        self.calls += 1
        chat = build_summary_request(messages=messages, previous_summary=previous, instructions=instructions)
        text = self.summarize(chat)
        if not isinstance(text, str) or not text.strip():
            raise SummaryError("the summarizer returned an empty summary")
        return text.strip()


def summarize_in_stages(
    messages: Sequence[Message],
    *,
    summarizer: SummaryClient,
    custom: str,
    previous_summary: str | None,
    max_chunk: int,
    parts: int = DEFAULT_PARTS,
    min_messages_for_split: int = MIN_MESSAGES_FOR_SPLIT,
) -> str:
    """Summarise in token-share parts, then merge them with the original previous summary."""
    safe = _strip_details(messages)
    too_few = len(safe) < max(2, min_messages_for_split)
    if parts <= 1 or too_few or estimate_messages_tokens(safe) <= max_chunk:
        return _summarize_with_fallback(safe, summarizer, custom, previous_summary, max_chunk)
    splits = [chunk for chunk in split_messages_by_token_share(safe, parts) if chunk]
    if len(splits) <= 1:
        return _summarize_with_fallback(safe, summarizer, custom, previous_summary, max_chunk)
    # Each part starts fresh; the original previous summary joins only at the merge (docs/openclaw-behaviour.md §1.7 step 9).
    partials = [_summarize_with_fallback(chunk, summarizer, custom, None, max_chunk) for chunk in splits]
    merge_messages = [{"role": "user", "content": text, "timestamp": 0} for text in partials]
    merge_custom = MERGE_SUMMARIES_INSTRUCTIONS
    if custom.strip():
        merge_custom = f"{MERGE_SUMMARIES_INSTRUCTIONS}\n\n{custom.strip()}"
    return _summarize_with_fallback(merge_messages, summarizer, merge_custom, previous_summary, max_chunk)


def _strip_details(messages: Sequence[Message]) -> list[Message]:
    """Drop tool-result `details`: they never count and never reach a summariser (docs/openclaw-behaviour.md §1.2)."""
    return [
        {k: v for k, v in m.items() if k != "details"}
        if m.get("role") == "toolResult" and "details" in m
        else m
        for m in messages
    ]


def _summarize_with_fallback(
    messages: Sequence[Message],
    summarizer: SummaryClient,
    custom: str,
    previous: str | None,
    max_chunk: int,
) -> str:
    """Summarise all; on failure retry without oversized messages, else re-raise (no wipe text)."""
    try:
        return _summarize_chunks(messages, summarizer, custom, previous, max_chunk)
    except Exception:
        small, notes = _oversized_plan(messages, summarizer.context_window)
        if not small or not notes:
            raise
    small = drop_orphan_tool_results(small)
    partial = _summarize_chunks(small, summarizer, custom, previous, max_chunk)
    return partial + "\n\n" + "\n".join(notes)


def _oversized_plan(messages: Sequence[Message], context_window: int) -> tuple[list[Message], list[str]]:
    """Split out messages over half the window, with `[Large ... omitted]` notes (ladder step b)."""
    small: list[Message] = []
    notes: list[str] = []
    for message in messages:
        tokens = estimate_message_tokens(message)
        if tokens * SAFETY_MARGIN <= context_window * 0.5:
            small.append(message)
        else:
            role = message.get("role")
            notes.append(f"[Large {role} (~{round(tokens / 1000)}K tokens) omitted from summary]")
    return small, notes


def _summarize_chunks(
    messages: Sequence[Message],
    summarizer: SummaryClient,
    custom: str,
    previous: str | None,
    max_chunk: int,
) -> str:
    """Summarise chunk by chunk as a rolling summary: each result feeds the next update prompt."""
    if not messages:
        return previous or DEFAULT_SUMMARY_FALLBACK
    summary = previous
    for chunk in chunk_messages_by_max_tokens(messages, max_chunk):
        summary = summarizer.request(chunk, summary, custom)
    return summary or DEFAULT_SUMMARY_FALLBACK


# --- History-share pruning (src/agents/compaction.ts `pruneHistoryForContextShare`) ---


def prune_history_for_context_share(
    messages: Sequence[Message],
    *,
    context_window: int,
    max_history_share: float,
    parts: int = DEFAULT_PARTS,
) -> tuple[list[Message], list[Message]]:
    """Drop the oldest token-share chunks until the rest fits the share; return (kept, dropped)."""
    budget = max(1, math.floor(context_window * max_history_share))
    kept, dropped = list(messages), []
    while kept and estimate_messages_tokens(kept) > budget:
        chunks = split_messages_by_token_share(kept, parts)
        if len(chunks) <= 1:
            break
        dropped.extend(chunks[0])
        kept = drop_orphan_tool_results([m for chunk in chunks[1:] for m in chunk])
    return kept, dropped
