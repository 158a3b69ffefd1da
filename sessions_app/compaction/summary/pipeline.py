"""The safeguard summarisation pipeline: from the messages to compact to the finished summary.

Pure module: no Django, no network. The model call is injected as `summarize(chat_messages) ->
text`, so the whole pipeline (staged chunking, rolling summaries, merge, recent-turn
preservation, tool failures, the 16000-char cap and the identifier survival check) is
deterministic given that callback. A failed or empty summary raises and nothing is written.
Reproduces the `session_before_compact` handler of OpenClaw's
src/agents/pi-hooks/compaction-safeguard.ts (docs/openclaw-behaviour.md §1.6-1.10; docs/design.md §D4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from memory_app.tokens import estimate_messages_tokens
from openclaw_site.teams.assistant_settings import SummarySettings
from sessions_app.compaction.summary.content import Message
from sessions_app.compaction.summary.identifiers import (
    extract_identifiers,
    message_source_texts,
    place_identifiers,
    split_identifier_section,
)
from sessions_app.compaction.summary.instructions import (
    build_structured_instructions,
    compose_split_turn_instructions,
    resolve_instructions,
)
from sessions_app.compaction.summary.prompts import SPLIT_TURN_HEADER, TURN_PREFIX_INSTRUCTIONS
from sessions_app.compaction.summary.serialisation import (
    build_structured_fallback_summary,
    collect_tool_failures,
    format_tool_failures_section,
    has_real_conversation,
)
from sessions_app.compaction.summary.staging import (
    SAFETY_MARGIN,
    SummarizeFn,
    SummaryClient,
    max_chunk_tokens,
    prune_history_for_context_share,
    summarize_in_stages,
)
from sessions_app.compaction.summary.turns import format_preserved_turns_section, split_preserved_recent_turns


@dataclass(frozen=True)
class SummaryResult:
    """The assembled summary and what went into it."""

    summary: str
    boundary_only: bool
    model_calls: int
    preserved_message_count: int
    tool_failure_count: int
    dropped_message_count: int
    added_identifiers: tuple[str, ...]


def summarize_session(
    *,
    plan_messages: Sequence[Message],
    turn_prefix_messages: Sequence[Message],
    previous_summary: str | None,
    settings: SummarySettings,
    context_window: int,
    summarize: SummarizeFn,
    command_instructions: str | None = None,
    tokens_before: int | None = None,
    also_present_in: str = "",
) -> SummaryResult:
    """Run OpenClaw's safeguard summarisation; raise on any failure so nothing is written."""
    plan, prefix = list(plan_messages), list(turn_prefix_messages)
    identifiers = extract_identifiers("\n".join(message_source_texts([*plan, *prefix])))
    if not has_real_conversation(plan) and not has_real_conversation(prefix):
        return _boundary_result(previous_summary, identifiers, also_present_in)
    client = SummaryClient(summarize, settings, context_window)
    structured = _structured_for(settings, command_instructions)
    to_summarize, previous, dropped = _prune_for_history_share(
        plan, prefix, previous_summary, tokens_before, client, structured
    )
    to_summarize, preserved = split_preserved_recent_turns(to_summarize, settings.recent_turns_preserve)
    max_chunk = max_chunk_tokens([*to_summarize, *prefix], context_window)
    body = _history_body(to_summarize, client, structured, previous, max_chunk)
    failures = collect_tool_failures([*plan, *prefix])
    suffix = _assemble_suffix(
        _split_turn_section(prefix, client, structured, max_chunk),
        format_preserved_turns_section(preserved),
        format_tool_failures_section(failures),
    )
    head, section, body_rest = split_identifier_section(body)
    summary, added = place_identifiers(head, section, body_rest + suffix, identifiers, also_present_in)
    return SummaryResult(
        summary=summary,
        boundary_only=False,
        model_calls=client.calls,
        preserved_message_count=len(preserved),
        tool_failure_count=len(failures),
        dropped_message_count=dropped,
        added_identifiers=added,
    )


def _structured_for(settings: SummarySettings, command_instructions: str | None) -> str:
    """Resolve /compact or config instructions and wrap them in the structured template."""
    custom = resolve_instructions(command_text=command_instructions, config_text=settings.custom_instructions)
    return build_structured_instructions(
        custom=custom,
        identifier_policy=settings.identifier_policy,
        identifier_instructions=settings.identifier_instructions,
    )


def _history_body(
    messages: list[Message],
    client: SummaryClient,
    structured: str,
    previous: str | None,
    max_chunk: int,
) -> str:
    """Summarise the history, or fall back to the structured previous summary when none is left."""
    if not messages:
        return build_structured_fallback_summary(previous)
    return summarize_in_stages(
        messages,
        summarizer=client,
        custom=structured,
        previous_summary=previous,
        max_chunk=max_chunk,
    )


def _boundary_result(
    previous_summary: str | None, identifiers: Sequence[str], also_present_in: str
) -> SummaryResult:
    """Return the no-model boundary summary that stops a cancel/re-trigger loop (docs/openclaw-behaviour.md §1.7 step 1)."""
    fallback = build_structured_fallback_summary(previous_summary)
    head, section, rest = split_identifier_section(fallback)
    summary, added = place_identifiers(head, section, rest, identifiers, also_present_in)
    return SummaryResult(
        summary=summary,
        boundary_only=True,
        model_calls=0,
        preserved_message_count=0,
        tool_failure_count=0,
        dropped_message_count=0,
        added_identifiers=added,
    )


def _prune_for_history_share(
    plan: list[Message],
    prefix: list[Message],
    previous_summary: str | None,
    tokens_before: int | None,
    client: SummaryClient,
    structured: str,
) -> tuple[list[Message], str | None, int]:
    """Drop old history when the kept tail is too large; summarise what was dropped (docs/openclaw-behaviour.md §1.7 step 6)."""
    if tokens_before is None:
        return plan, previous_summary, 0
    window, share = client.context_window, client.settings.max_history_share
    new_content = max(0, math.floor(tokens_before - estimate_messages_tokens([*plan, *prefix])))
    if new_content <= math.floor(window * share * SAFETY_MARGIN):
        return plan, previous_summary, 0
    kept, dropped = prune_history_for_context_share(plan, context_window=window, max_history_share=share)
    if not dropped:
        return plan, previous_summary, 0
    # OpenClaw skips a failed dropped-history summary with a warning; we let it raise, because
    # continuing would silently lose the dropped messages (docs/design.md §D4).
    dropped_summary = summarize_in_stages(
        dropped,
        summarizer=client,
        custom=structured,
        previous_summary=previous_summary,
        max_chunk=max_chunk_tokens(dropped, window),
    )
    return kept, dropped_summary, len(dropped)


def _split_turn_section(prefix: list[Message], client: SummaryClient, structured: str, max_chunk: int) -> str:
    """Summarise a split turn's prefix into `**Turn Context (split turn):**` (docs/openclaw-behaviour.md §1.7 step 10)."""
    if not prefix:
        return ""
    custom = compose_split_turn_instructions(TURN_PREFIX_INSTRUCTIONS, structured)
    prefix_summary = summarize_in_stages(
        prefix, summarizer=client, custom=custom, previous_summary=None, max_chunk=max_chunk
    )
    return f"{SPLIT_TURN_HEADER}\n\n{prefix_summary}"


def _assemble_suffix(*sections: str) -> str:
    """Join the protected suffix sections, always starting with a blank line (`assembleSuffix`)."""
    suffix = ""
    for section in sections:
        if section:
            suffix = suffix + section if suffix.strip() else section.lstrip()
    if suffix and not suffix[0].isspace():
        suffix = "\n\n" + suffix
    return suffix
