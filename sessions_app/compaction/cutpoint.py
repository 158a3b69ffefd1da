"""Compaction cut point and session context (docs/openclaw-behaviour.md §1.1 and §1.5, Pi `compaction.ts`).

Pure module: no Django, no database. It works on transcript entries in the JSONL v3 shape,
`{"type": "message", "id", "message"}` and `{"type": "compaction", "id", "summary",
"firstKeptEntryId", "tokensBefore"}`, in path order (root to leaf), and never mutates them.
Token counts use the CJK-weighted estimates of `memory_app.tokens` (docs/design.md §D3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_app.tokens import carry_estimate, estimate_context_tokens, estimate_message_tokens
from providers.message_types import AgentMessage

Entry = Mapping[str, Any]
Message = AgentMessage

COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"

# Pi `findValidCutPoints`: any message role except toolResult. `system` is ours (an injected
# note): cutting there orphans nothing, so it is a valid cut point too.
_CUT_POINT_ROLES = frozenset(
    {"user", "assistant", "system", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)
# Pi `findTurnStartIndex`: a turn starts at a user (or bashExecution) message.
_TURN_START_ROLES = frozenset({"user", "bashExecution"})
# Entry types Pi treats as user-role messages: valid cut points and turn starts.
_USER_LIKE_ENTRY_TYPES = frozenset({"branch_summary", "custom_message"})


@dataclass(frozen=True)
class CompactionPlan:
    """What one compaction would summarise and keep (Pi `CompactionPreparation`)."""

    first_kept_entry_id: str
    first_kept_index: int
    messages_to_summarize: tuple[Message, ...]
    turn_prefix_messages: tuple[Message, ...]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    summarized_entry_ids: tuple[str, ...]
    prefix_entry_ids: tuple[str, ...]

    @property
    def nothing_to_compact(self) -> bool:
        """Tell whether the cut keeps everything (Pi: "Nothing to compact (session too small)")."""
        return not self.messages_to_summarize and not self.turn_prefix_messages


@dataclass(frozen=True)
class _CutPoint:
    """Index of the first kept entry and, for a split turn, of the turn's user message."""

    first_kept_index: int
    turn_start_index: int
    is_split_turn: bool


def summary_message_text(summary: str) -> str:
    """Return the user-message text a compaction summary becomes (Pi `core/messages.ts`)."""
    return COMPACTION_SUMMARY_PREFIX + summary + COMPACTION_SUMMARY_SUFFIX


def build_session_context(entries: Sequence[Entry]) -> list[Message]:
    """Return the model-visible messages: latest summary, kept entries, then newer ones."""
    compaction_index = _latest_compaction_index(entries)
    if compaction_index < 0:
        return [_entry_message(entry) for entry in entries if _is_message_entry(entry)]
    compaction = entries[compaction_index]
    kept_start = _first_kept_index(entries, compaction_index)
    before = entries[kept_start:compaction_index] if kept_start >= 0 else ()
    after = entries[compaction_index + 1 :]
    return [
        _summary_message(compaction),
        *(_entry_message(entry) for entry in before if _is_message_entry(entry)),
        *(_entry_message(entry) for entry in after if _is_message_entry(entry)),
    ]


def extend_session_context(context: Sequence[Message], added: Sequence[Entry]) -> list[Message] | None:
    """Return `build_session_context` of entries that grew by ``added``, given it for the shorter ones.

    Entries added after the latest compaction only append their messages; None when ``added``
    holds a compaction (the view starts anew: build it from all entries).
    """
    if any(entry.get("type") == "compaction" for entry in added):
        return None
    return [*context, *(_entry_message(entry) for entry in added if _is_message_entry(entry))]


def prepare_compaction(entries: Sequence[Entry], *, keep_recent_tokens: int) -> CompactionPlan | None:
    """Find the cut point and split the history into summarised and kept parts (Pi)."""
    if not entries or entries[-1].get("type") == "compaction":
        return None
    prev_index = _latest_compaction_index(entries)
    start = _range_start(entries, prev_index)
    cut = _find_cut_point(entries, start, len(entries), keep_recent_tokens)
    first_kept_id = entries[cut.first_kept_index].get("id")
    if not first_kept_id:
        return None
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_index
    summarized = _message_entries(entries, start, history_end)
    prefix = (
        _message_entries(entries, cut.turn_start_index, cut.first_kept_index) if cut.is_split_turn else ()
    )
    return CompactionPlan(
        first_kept_entry_id=str(first_kept_id),
        first_kept_index=cut.first_kept_index,
        messages_to_summarize=tuple(_entry_message(entry) for entry in summarized),
        turn_prefix_messages=tuple(_entry_message(entry) for entry in prefix),
        is_split_turn=cut.is_split_turn,
        tokens_before=_tokens_before(entries, prev_index),
        previous_summary=_previous_summary(entries, prev_index),
        summarized_entry_ids=tuple(str(entry.get("id")) for entry in summarized),
        prefix_entry_ids=tuple(str(entry.get("id")) for entry in prefix),
    )


def _range_start(entries: Sequence[Entry], prev_index: int) -> int:
    """Return where summarisable history starts: the previous compaction's first kept entry."""
    # Deliberate deviation from Pi (which starts at prev + 1): messages kept before the previous
    # compaction are still in the model's context, so the next compaction must summarise them
    # rather than silently drop them (docs/design.md §D4, "compaction never wipes").
    if prev_index < 0:
        return 0
    kept = _first_kept_index(entries, prev_index)
    return kept if kept >= 0 else prev_index + 1


def _find_cut_point(entries: Sequence[Entry], start: int, end: int, keep_recent_tokens: int) -> _CutPoint:
    """Walk back from the newest entry until keep_recent_tokens are kept (Pi `findCutPoint`)."""
    cut_points = [i for i in range(start, end) if _is_valid_cut_point(entries[i])]
    if not cut_points:
        return _CutPoint(first_kept_index=start, turn_start_index=-1, is_split_turn=False)
    cut_index = _budget_cut_index(entries, start, end, keep_recent_tokens, cut_points)
    # Include non-message entries (settings, labels) just before the cut in the kept part.
    while cut_index > start and entries[cut_index - 1].get("type") not in ("message", "compaction"):
        cut_index -= 1
    cut_entry = entries[cut_index]
    if _is_message_entry(cut_entry) and cut_entry["message"].get("role") == "user":
        return _CutPoint(first_kept_index=cut_index, turn_start_index=-1, is_split_turn=False)
    turn_start = _find_turn_start(entries, cut_index, start)
    return _CutPoint(first_kept_index=cut_index, turn_start_index=turn_start, is_split_turn=turn_start != -1)


def _budget_cut_index(
    entries: Sequence[Entry], start: int, end: int, keep_recent_tokens: int, cut_points: list[int]
) -> int:
    """Return the first valid cut point at or after the entry where the kept budget is reached."""
    accumulated = 0
    for i in range(end - 1, start - 1, -1):
        if not _is_message_entry(entries[i]):
            continue
        accumulated += estimate_message_tokens(entries[i]["message"])
        if accumulated >= keep_recent_tokens:
            # Never a toolResult: cutting at its assistant keeps the call and its results together.
            return next((point for point in cut_points if point >= i), cut_points[0])
    # Budget never reached: keep everything from the first cut point, summarise nothing.
    return cut_points[0]


def _find_turn_start(entries: Sequence[Entry], index: int, start: int) -> int:
    """Return the index of the user message that opened the turn holding index, or -1."""
    for i in range(index, start - 1, -1):
        entry = entries[i]
        if entry.get("type") in _USER_LIKE_ENTRY_TYPES:
            return i
        if _is_message_entry(entry) and entry["message"].get("role") in _TURN_START_ROLES:
            return i
    return -1


def _is_valid_cut_point(entry: Entry) -> bool:
    """Tell whether the kept history may start at this entry (never at a toolResult)."""
    if entry.get("type") in _USER_LIKE_ENTRY_TYPES:
        return True
    return _is_message_entry(entry) and entry["message"].get("role") in _CUT_POINT_ROLES


def _is_message_entry(entry: Entry) -> bool:
    """Tell whether an entry carries an AgentMessage."""
    return entry.get("type") == "message" and isinstance(entry.get("message"), Mapping)


def _message_entries(entries: Sequence[Entry], start: int, end: int) -> tuple[Entry, ...]:
    """Return the message entries in [start, end)."""
    return tuple(entry for entry in entries[max(start, 0) : end] if _is_message_entry(entry))


def _entry_message(entry: Entry) -> Message:
    """Return the entry's message carrying our `entryId` key: itself if it has it, else a copy.

    The message itself, not a copy, is what lets a cached view's memo recognise it
    (`sessions_app.context.view_cache.ViewMemo`); messages are never changed in place.
    """
    original: Message = entry["message"]
    if original.get("entryId") == entry.get("id"):
        return original
    message = original.copy()
    message.setdefault("entryId", entry.get("id"))
    carry_estimate(original, message)  # the id is no text the model counts
    return message


def _latest_compaction_index(entries: Sequence[Entry]) -> int:
    """Return the index of the latest compaction entry, or -1."""
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].get("type") == "compaction":
            return i
    return -1


def _first_kept_index(entries: Sequence[Entry], compaction_index: int) -> int:
    """Return the index before compaction_index whose id is its firstKeptEntryId, or -1."""
    first_kept_id = entries[compaction_index].get("firstKeptEntryId")
    for i in range(compaction_index):
        if entries[i].get("id") == first_kept_id:
            return i
    return -1


def _summary_message(compaction: Entry) -> Message:
    """Return the `compactionSummary` message a compaction entry contributes to context."""
    timestamp = compaction.get("timestamp")
    return {
        "role": "compactionSummary",
        "summary": str(compaction.get("summary") or ""),
        "timestamp": timestamp if isinstance(timestamp, int) else 0,
        "entryId": compaction.get("id"),
    }


def _previous_summary(entries: Sequence[Entry], prev_index: int) -> str | None:
    """Return the previous compaction's summary, fed into the update prompt (docs/openclaw-behaviour.md §1.10)."""
    if prev_index < 0:
        return None
    summary = entries[prev_index].get("summary")
    return summary if isinstance(summary, str) else None


def _tokens_before(entries: Sequence[Entry], prev_index: int) -> int:
    """Estimate the current context: summary + kept + newer messages (docs/openclaw-behaviour.md §1.5 step 2)."""
    context = build_session_context(entries)
    if prev_index < 0:
        return estimate_context_tokens(context).tokens
    # Usage reported before the previous compaction measured the old, longer context (OpenClaw bug reports, docs/openclaw-behaviour.md §5):
    # only trust usage from assistants after it, and estimate everything before.
    newer = sum(1 for entry in entries[prev_index + 1 :] if _is_message_entry(entry))
    kept_count = len(context) - newer
    head = sum(estimate_message_tokens(message) for message in context[:kept_count])
    tail = context[kept_count:]
    tail_estimate = estimate_context_tokens(tail)
    if tail_estimate.last_usage_index is not None:
        # Reported usage already covers everything sent before that assistant, head included.
        return tail_estimate.tokens
    return head + tail_estimate.tokens
