"""Token estimation: OpenClaw's CJK-weighted char count, Pi's per-message rules (docs/design.md §D3).

Pure module: no Django, no database. Every estimate in the project goes through here so that
pruning, compaction, flush thresholds and chunking agree on what a "token" is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

# docs/openclaw-behaviour.md §1.2: `CHARS_PER_TOKEN_ESTIMATE = 4` (src/utils/cjk-chars.ts).
CHARS_PER_TOKEN = 4
# Pi counts 4800 chars per image block, i.e. 1200 tokens (compaction.ts `ESTIMATED_IMAGE_CHARS`).
IMAGE_TOKENS = 1200
# A single odd provider report must not move thresholds by more than 2x either way.
MIN_CORRECTION_RATIO = 0.5
MAX_CORRECTION_RATIO = 2.0

# src/utils/cjk-chars.ts `NON_LATIN_RE`: CJK, kana, Hangul, Yi, compatibility ideographs, Ext B+.
_NON_LATIN_RE = re.compile("[\u2e80-\u9fff\ua000-\ua4ff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]")
_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff]")
_USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite")


@dataclass(frozen=True)
class ContextEstimate:
    """Context size from the last provider usage plus estimates of what came after it."""

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None


def estimate_string_chars(text: str) -> int:
    """Return OpenClaw's CJK-weighted char count: each CJK char counts 4, others 1."""
    if not text:
        return 0
    non_latin = len(_NON_LATIN_RE.findall(text))
    # OpenClaw counts UTF-16 units and folds only CJK Ext B+ surrogate pairs to one char
    # (cjk-chars.ts `countCodePoints`), so other astral chars such as emoji still count 2.
    astral_non_cjk = len(_ASTRAL_RE.findall(text)) - _count_astral_cjk(text, non_latin)
    return len(text) + astral_non_cjk + non_latin * (CHARS_PER_TOKEN - 1)


def _count_astral_cjk(text: str, non_latin: int) -> int:
    """Count CJK chars above the BMP (U+20000-U+2FA1F), skipping the scan when none can exist."""
    if non_latin == 0:
        return 0
    return sum(1 for ch in text if 0x20000 <= ord(ch) <= 0x2FA1F)


def estimate_text_tokens(text: str) -> int:
    """Return ceil(weighted chars / 4) for a piece of text."""
    return math.ceil(estimate_string_chars(text) / CHARS_PER_TOKEN)


class EstimateMemo:
    """Estimates of message objects already counted, for as long as the memo is active.

    A context build estimates the same messages several times (the view's size, the prompt, its
    breakdown); with a memo active (`active`) each message object is counted once, and a stored
    message's estimate (`Message.estimated_tokens`, computed by these rules when it was stored)
    can be remembered without counting at all. Entries are keyed by the object itself (its id,
    with the object kept, so an id is never reused while the memo lives); messages are never
    changed in place (pruning copies), so an object's estimate stays true.
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[Mapping[str, Any], int]] = {}
        self._also: list[EstimateMemo] = []

    def remember(self, message: Mapping[str, Any], tokens: int) -> None:
        self._known[id(message)] = (message, tokens)

    def known(self, message: Mapping[str, Any]) -> int | None:
        hit = self._known.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        for other in self._also:
            tokens = other.known(message)
            if tokens is not None:
                return tokens
        return None

    def consult(self, other: EstimateMemo) -> None:
        """Also answer from ``other`` (a longer-lived memo, such as a cached view's), unchanged."""
        if other is not self and all(memo is not other for memo in self._also):
            self._also.append(other)

    @contextmanager
    def active(self) -> Iterator[EstimateMemo]:
        """Use this memo for every estimate made in the block (on this thread or task)."""
        token = _active_memo.set(self)
        try:
            yield self
        finally:
            _active_memo.reset(token)


_active_memo: ContextVar[EstimateMemo | None] = ContextVar("openclaw_estimate_memo", default=None)


def active_memo() -> EstimateMemo | None:
    """Return the memo estimates use now, if a block made one active."""
    return _active_memo.get()


def carry_estimate(original: Mapping[str, Any], copy: Mapping[str, Any]) -> None:
    """Let the active memo know that ``copy`` counts as ``original`` (a copy that adds no text)."""
    memo = _active_memo.get()
    tokens = memo.known(original) if memo is not None else None
    if memo is not None and tokens is not None:
        memo.remember(copy, tokens)


def estimate_message_tokens(message: Mapping[str, Any]) -> int:
    """Estimate one AgentMessage with Pi's per-role rules and the CJK-weighted count."""
    memo = _active_memo.get()
    if memo is None:
        return _estimate_message_tokens(message)
    tokens = memo.known(message)
    if tokens is None:
        tokens = _estimate_message_tokens(message)
        memo.remember(message, tokens)
    return tokens


def _estimate_message_tokens(message: Mapping[str, Any]) -> int:
    role = message.get("role")
    if role in ("user", "toolResult", "custom"):
        chars, images = _content_chars_and_images(message.get("content"))
    elif role == "assistant":
        chars, images = _assistant_chars(message.get("content")), 0
    elif role in ("compactionSummary", "branchSummary"):
        chars, images = estimate_string_chars(_as_str(message.get("summary"))), 0
    elif role == "system":
        chars, images = _content_chars_and_images(message.get("content"))[0], 0
    elif role == "bashExecution":
        text = _as_str(message.get("command")) + _as_str(message.get("output"))
        chars, images = estimate_string_chars(text), 0
    else:
        return 0
    return math.ceil(chars / CHARS_PER_TOKEN) + images * IMAGE_TOKENS


def _as_str(value: object) -> str:
    """Return value if it is a string, else the empty string."""
    return value if isinstance(value, str) else ""


def _content_chars_and_images(content: object) -> tuple[int, int]:
    """Return (weighted text chars, image block count) of a string or block list."""
    if isinstance(content, str):
        return estimate_string_chars(content), 0
    chars = images = 0
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            chars += estimate_string_chars(_as_str(block.get("text")))
        elif block.get("type") == "image":
            images += 1
    return chars, images


def _assistant_chars(content: object) -> int:
    """Return weighted chars of an assistant's text, thinking and tool calls (Pi rules)."""
    if isinstance(content, str):
        return estimate_string_chars(content)
    chars = 0
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            chars += estimate_string_chars(_as_str(block.get("text")))
        elif kind == "thinking":
            chars += estimate_string_chars(_as_str(block.get("thinking")))
        elif kind == "toolCall":
            chars += estimate_string_chars(_as_str(block.get("name")) + _tool_arguments_json(block))
    return chars


def _tool_arguments_json(block: Mapping[str, Any]) -> str:
    """Serialise tool-call arguments the way JSON.stringify does (compact, raw unicode)."""
    arguments = block.get("arguments")
    try:
        return json.dumps({} if arguments is None else arguments, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


def estimate_messages_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Return the sum of per-message estimates."""
    return sum(estimate_message_tokens(message) for message in messages)


def calculate_context_tokens(usage: Mapping[str, Any]) -> int:
    """Return totalTokens, else input + output + cacheRead + cacheWrite (Pi)."""
    total = usage.get("totalTokens")
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total:
        return int(total)
    return int(sum(_usage_number(usage, key) for key in _USAGE_KEYS))


def _usage_number(usage: Mapping[str, Any], key: str) -> float:
    """Return a numeric usage field, treating missing or non-numeric values as 0."""
    value = usage.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return 0


def _usage_of(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Return an assistant message's usage if it is trustworthy (Pi `getAssistantUsage`)."""
    if message.get("role") != "assistant" or message.get("stopReason") in ("aborted", "error"):
        return None
    usage = message.get("usage")
    # Pi skips all-zero usage too: some providers send an empty usage block on failure.
    if not isinstance(usage, Mapping) or calculate_context_tokens(usage) <= 0:
        return None
    return usage


def estimate_context_tokens(messages: Sequence[Mapping[str, Any]]) -> ContextEstimate:
    """Estimate context size: last valid usage plus estimates of later messages (Pi)."""
    for index in range(len(messages) - 1, -1, -1):
        usage = _usage_of(messages[index])
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing = estimate_messages_tokens(messages[index + 1 :])
            return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, index)
    total = estimate_messages_tokens(messages)
    return ContextEstimate(total, usage_tokens=0, trailing_tokens=total, last_usage_index=None)


def correction_ratio(estimated: int, reported: int) -> float:
    """Return reported / estimated, clamped to [0.5, 2.0]; 1.0 when either side is not positive."""
    if estimated <= 0 or reported <= 0:
        return 1.0
    return _clamp_ratio(reported / estimated)


def _clamp_ratio(ratio: float) -> float:
    """Clamp a correction ratio so one odd report cannot wreck the flush/compaction thresholds."""
    if not math.isfinite(ratio):
        return 1.0
    return min(MAX_CORRECTION_RATIO, max(MIN_CORRECTION_RATIO, ratio))


def corrected_estimate(estimate: int, ratio: float | None) -> int:
    """Scale an estimate by a recorded correction ratio, rounding up; None leaves it unchanged."""
    if ratio is None:
        return estimate
    # round() first so float noise (100 * 1.1 = 110.00000000000001) does not add a token.
    return math.ceil(round(estimate * _clamp_ratio(ratio), 6))
