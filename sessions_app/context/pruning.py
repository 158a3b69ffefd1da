"""Context pruning: trim or clear old tool results in the copy sent to the model.

Reproduces OpenClaw's `pruneContextMessages` (docs/openclaw-behaviour.md §3) with two of our
changes (docs/design.md §D5): every trimmed or cleared tool result names its stored message so the
model can read it back with `tool_result_get`, and besides `cache-ttl` there is an `always` mode.

Pure module: no Django, no database. Storage is never touched; the input list is never mutated.
The caller passes `PruningSettings` from the assistant's typed settings
(`openclaw_site.teams.assistant_settings`); nothing here reads or defaults a setting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memory_app.tokens import CHARS_PER_TOKEN, estimate_string_chars
from memory_app.utf16 import utf16_head, utf16_len, utf16_tail
from openclaw_site.teams.assistant_settings import PruningSettings, SoftTrim, ToolMatch
from providers.message_types import AgentMessage

PruneAction = Literal["trimmed", "cleared", "images_removed"]
Message = AgentMessage

# pruner.ts: images weigh 8000 chars here (not Pi's 4800); roles it does not know weigh 256.
IMAGE_CHAR_ESTIMATE = 8_000
OTHER_ROLE_CHARS = 256
TOOL_CALL_ERROR_CHARS = 128
PRUNED_IMAGE_MARKER = "[image removed during context pruning]"
TRIM_NOTE = "\n\n[Tool result trimmed: kept first {head} chars and last {tail} chars of {raw} chars.]"
# docs/design.md §D5: the model can fetch the original back, so pruning loses nothing for good.
ORIGINAL_REFERENCE = "\n[Original: message {entry_id}; call tool_result_get to read it in full.]"


# --- which tools may be pruned (docs/openclaw-behaviour.md §3.1) ------------------------------


def is_prunable_tool(tools: ToolMatch, tool_name: str | None) -> bool:
    """Tell whether results of this tool may be trimmed or cleared: deny wins, allow restricts."""
    name = (tool_name or "").strip().lower()
    if _matches_any(name, tools.deny):
        return False
    return not _normalised_globs(tools.allow) or _matches_any(name, tools.allow)


def _normalised_globs(patterns: tuple[str, ...]) -> list[str]:
    """Trim and lowercase globs, dropping empty ones (OpenClaw's `compileGlobPatterns`)."""
    return [p for p in (raw.strip().lower() for raw in patterns) if p]


def _matches_any(name: str, patterns: tuple[str, ...]) -> bool:
    """Tell whether name matches one of the globs, where `*` is the only wildcard."""
    for pattern in _normalised_globs(patterns):
        regex = "^" + ".*".join(re.escape(piece) for piece in pattern.split("*")) + "$"
        if re.match(regex, name, re.DOTALL):
            return True
    return False


# --- TTL gate --------------------------------------------------------------------------------


def should_prune(settings: PruningSettings, *, now_ms: int, last_cache_touch_at_ms: int | None) -> bool:
    """Tell whether pruning runs now: mode `always`, or the TTL gate (docs/openclaw-behaviour.md §3.2).

    The caller sets `last_cache_touch_at` to now when a pass changed something, so the pass runs
    once per TTL window, as OpenClaw's extension does.
    """
    if settings.mode == "always":
        return True
    if settings.mode != "cache-ttl" or last_cache_touch_at_ms is None or settings.ttl_ms <= 0:
        return False
    return now_ms - last_cache_touch_at_ms >= settings.ttl_ms


# --- char estimates (pruner.ts `estimateMessageChars`) ---------------------------------------


def _blocks(content: object) -> list[Mapping[str, Any]]:
    """Return content as a list of blocks; a bare string becomes one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def _text_of(block: Mapping[str, Any], key: str = "text") -> str:
    """Return a string field of a block, or the empty string."""
    value = block.get(key)
    return value if isinstance(value, str) else ""


def _text_and_image_chars(content: object) -> int:
    """Return CJK-weighted text chars plus 8000 per image block."""
    chars = 0
    for block in _blocks(content):
        if block.get("type") == "text":
            chars += estimate_string_chars(_text_of(block))
        elif block.get("type") == "image":
            chars += IMAGE_CHAR_ESTIMATE
    return chars


def _assistant_block_chars(block: Mapping[str, Any]) -> int:
    """Return the chars one assistant block contributes to the pruning estimate."""
    kind = block.get("type")
    if kind == "text":
        return estimate_string_chars(_text_of(block))
    if kind in ("thinking", "redacted_thinking"):
        chars = estimate_string_chars(_text_of(block, "thinking"))
        chars += estimate_string_chars(_text_of(block, "thinkingSignature"))
        if kind == "redacted_thinking":
            chars += estimate_string_chars(_text_of(block, "data"))
        return chars
    if kind == "toolCall":
        try:
            arguments = block.get("arguments")
            dumped = json.dumps(
                {} if arguments is None else arguments, separators=(",", ":"), ensure_ascii=False
            )
        except (TypeError, ValueError):
            return TOOL_CALL_ERROR_CHARS
        # pruner.ts counts JSON.stringify(arguments).length: raw UTF-16, not CJK-weighted.
        return utf16_len(dumped)
    return 0


def estimate_message_chars(message: Mapping[str, Any]) -> int:
    """Return the pruning char estimate of one message (CJK-weighted, images 8000, others 256)."""
    role = message.get("role")
    if role in ("user", "toolResult"):
        return _text_and_image_chars(message.get("content"))
    if role == "assistant":
        return sum(_assistant_block_chars(block) for block in _blocks(message.get("content")))
    return OTHER_ROLE_CHARS


# --- soft trim -------------------------------------------------------------------------------


def _take_head(parts: list[str], max_chars: int) -> str:
    """Take the first max_chars of the parts joined with newlines (pruner.ts)."""
    remaining, out = max_chars, []
    for index, part in enumerate(parts):
        if remaining <= 0:
            break
        if index > 0:
            out.append("\n")
            remaining -= 1
            if remaining <= 0:
                break
        out.append(utf16_head(part, remaining))
        remaining -= utf16_len(part)
    return "".join(out)


def _take_tail(parts: list[str], max_chars: int) -> str:
    """Take the last max_chars of the parts joined with newlines (pruner.ts)."""
    remaining, out = max_chars, []
    for index in range(len(parts) - 1, -1, -1):
        if remaining <= 0:
            break
        part_len = utf16_len(parts[index])
        if part_len > remaining:
            out.append(utf16_tail(parts[index], remaining))
            break
        out.append(parts[index])
        remaining -= part_len
        if remaining > 0 and index > 0:
            out.append("\n")
            remaining -= 1
    return "".join(reversed(out))


def _soft_trim_text(message: Mapping[str, Any], soft_trim: SoftTrim) -> tuple[str, PruneAction] | None:
    """Return the replacement text of a tool result and what was done, or None to keep it."""
    blocks = _blocks(message.get("content"))
    has_images = any(block.get("type") == "image" for block in blocks)
    # Images become a marker in place, so the result still says one was there.
    parts = [
        _text_of(block) if block.get("type") == "text" else PRUNED_IMAGE_MARKER
        for block in blocks
        if block.get("type") == "text" or (has_images and block.get("type") == "image")
    ]
    raw_len = sum(utf16_len(part) for part in parts) + max(0, len(parts) - 1)
    head, tail = soft_trim.head_chars, soft_trim.tail_chars
    if raw_len <= soft_trim.max_chars or head + tail >= raw_len:
        return ("\n".join(parts), "images_removed") if has_images else None
    trimmed = f"{_take_head(parts, head)}\n...\n{_take_tail(parts, tail)}"
    return trimmed + TRIM_NOTE.format(head=head, tail=tail, raw=raw_len), "trimmed"


# --- the pass --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PruneChange:
    """What pruning did to one tool result; chars are pruning estimates before and after."""

    index: int
    entry_id: str | None
    tool_name: str | None
    action: PruneAction
    chars_before: int
    chars_after: int


@dataclass(frozen=True)
class PruneResult:
    """The message list to send and the changes made to it, in message order."""

    messages: list[Message]
    changes: tuple[PruneChange, ...] = ()

    @property
    def changed(self) -> bool:
        """Tell whether anything was trimmed or cleared."""
        return bool(self.changes)


class _Pass:
    """Working state of one pruning pass: a copy of the list, running totals, changes so far."""

    def __init__(self, messages: Sequence[Message], char_window: int) -> None:
        self.originals = messages
        self.messages: list[Message] = list(messages)
        self.char_window = char_window
        self.total_chars = sum(estimate_message_chars(message) for message in messages)
        self.changes: dict[int, PruneChange] = {}

    @property
    def ratio(self) -> float:
        """Return the estimated share of the context window in use."""
        return self.total_chars / self.char_window

    def replace(self, index: int, text: str, action: PruneAction) -> None:
        """Swap a tool result's content for one text block that names the stored original."""
        original = self.originals[index]
        entry_id = original.get("entryId")
        if entry_id:
            text += ORIGINAL_REFERENCE.format(entry_id=entry_id)
        updated: Message = {**self.messages[index], "content": [{"type": "text", "text": text}]}
        self.total_chars += estimate_message_chars(updated) - estimate_message_chars(self.messages[index])
        self.messages[index] = updated
        self.changes[index] = PruneChange(
            index=index,
            entry_id=entry_id,
            tool_name=original.get("toolName"),
            action=action,
            chars_before=estimate_message_chars(original),
            chars_after=estimate_message_chars(updated),
        )

    def result(self) -> PruneResult:
        """Return the pruned list and its changes."""
        return PruneResult(self.messages, tuple(self.changes[i] for i in sorted(self.changes)))


def _assistant_cutoff(messages: Sequence[Mapping[str, Any]], keep_last: int) -> int | None:
    """Return the index of the N-th last assistant message; None if there are fewer than N."""
    if keep_last <= 0:
        return len(messages)
    remaining = keep_last
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            remaining -= 1
            if remaining == 0:
                return index
    return None


def _first_user_index(messages: Sequence[Mapping[str, Any]]) -> int:
    """Return the first user message's index; bootstrap reads before it are never pruned."""
    for index, message in enumerate(messages):
        if message.get("role") == "user":
            return index
    return len(messages)


def _prunable_indexes(
    messages: Sequence[Mapping[str, Any]], *, start: int, cutoff: int, tools: ToolMatch
) -> list[int]:
    """Return indexes of tool results in [start, cutoff) whose tool may be pruned."""
    return [
        index
        for index in range(start, cutoff)
        if messages[index].get("role") == "toolResult"
        and is_prunable_tool(tools, messages[index].get("toolName"))
    ]


def prune_context(
    messages: Sequence[Message], *, settings: PruningSettings, context_window: int | None
) -> PruneResult:
    """Soft-trim, then hard-clear, old tool results until the context is under the ratios.

    This is `pruneContextMessages` (docs/openclaw-behaviour.md §3.3); the TTL gate is `should_prune`, not here.
    """
    unchanged = PruneResult(list(messages))
    if not context_window or context_window <= 0:
        return unchanged
    cutoff = _assistant_cutoff(messages, settings.keep_last_assistants)
    if cutoff is None:
        return unchanged
    prunable = _prunable_indexes(
        messages, start=_first_user_index(messages), cutoff=cutoff, tools=settings.tools
    )
    work = _Pass(messages, context_window * CHARS_PER_TOKEN)
    if work.ratio < settings.soft_trim_ratio:
        return unchanged
    for index in prunable:
        trimmed = _soft_trim_text(work.messages[index], settings.soft_trim)
        if trimmed is not None:
            work.replace(index, *trimmed)
    if work.ratio >= settings.hard_clear_ratio and settings.hard_clear.enabled:
        _hard_clear_pass(work, prunable, settings)
    return work.result()


def _hard_clear_pass(work: _Pass, prunable: list[int], settings: PruningSettings) -> None:
    """Clear prunable tool results oldest first until the ratio drops below hardClearRatio."""
    prunable_chars = sum(estimate_message_chars(work.messages[index]) for index in prunable)
    # Clearing a handful of small results would break the prompt cache for little gain.
    if prunable_chars < settings.min_prunable_tool_chars:
        return
    for index in prunable:
        if work.ratio < settings.hard_clear_ratio:
            break
        work.replace(index, settings.hard_clear.placeholder, "cleared")
