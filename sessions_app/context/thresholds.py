"""Flush and compaction thresholds from one effective reserve (docs/design.md §D2).

Pure module: no Django. OpenClaw computes the flush threshold from `reserveTokensFloor` while Pi
compacts at `window - reserveTokens`, so a larger `reserveTokens` made compaction fire before the
flush could (docs/openclaw-behaviour.md §2.2). Here both come from the same
`R = max(reserveTokens, reserveTokensFloor)`:

* compact when `tokens > window - R` (strictly greater, Pi `shouldCompact`);
* flush when `projected >= window - R - softThresholdTokens` (inclusive, OpenClaw
  `shouldRunMemoryFlush`), or when the transcript reaches `forceFlushTranscriptBytes`;
* at most one flush per compaction cycle; `memory_flush_compaction_count` NULL means never.

With the defaults and a 200000-token window: R = 20000, flush at 176000, compaction above 180000.
The settings come in as the assistant's typed `CompactionSettings`; nothing here defaults them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from openclaw_site.teams.assistant_settings import CompactionSettings

FlushReason = Literal["tokens", "transcript_bytes"]


class ThresholdsDict(TypedDict):
    """`Thresholds` as the API shows them."""

    context_window: int
    reserve_tokens: int
    soft_threshold_tokens: int
    flush_threshold: int
    compaction_threshold: int
    flush_enabled: bool
    force_flush_transcript_bytes: int


@dataclass(frozen=True)
class Thresholds:
    """An assistant's window and the two thresholds derived from it."""

    context_window: int
    reserve_tokens: int
    soft_threshold_tokens: int
    flush_enabled: bool
    force_flush_transcript_bytes: int

    @property
    def compaction_threshold(self) -> int:
        """Return `window - R`; compaction fires strictly above it."""
        return max(0, self.context_window - self.reserve_tokens)

    @property
    def flush_threshold(self) -> int:
        """Return `window - R - softThresholdTokens`; the flush fires at or above it."""
        return max(0, self.context_window - self.reserve_tokens - self.soft_threshold_tokens)

    def should_compact(self, tokens: int | None) -> bool:
        """Tell whether a context of `tokens` must be compacted (Pi `shouldCompact`)."""
        if tokens is None or self.compaction_threshold <= 0:
            return False
        return tokens > self.compaction_threshold

    def flush_reason(
        self, *, projected_tokens: int | None, transcript_bytes: int, already_flushed: bool
    ) -> FlushReason | None:
        """Return why a flush is due now, or None (OpenClaw `shouldRunMemoryFlush` + force path)."""
        if not self.flush_enabled or already_flushed:
            return None
        threshold = self.flush_threshold
        if projected_tokens and projected_tokens > 0 and threshold > 0 and projected_tokens >= threshold:
            return "tokens"
        force = self.force_flush_transcript_bytes
        if force > 0 and transcript_bytes >= force:
            return "transcript_bytes"
        return None

    def as_dict(self) -> ThresholdsDict:
        """Return the figures the API shows."""
        return {
            "context_window": self.context_window,
            "reserve_tokens": self.reserve_tokens,
            "soft_threshold_tokens": self.soft_threshold_tokens,
            "flush_threshold": self.flush_threshold,
            "compaction_threshold": self.compaction_threshold,
            "flush_enabled": self.flush_enabled,
            "force_flush_transcript_bytes": self.force_flush_transcript_bytes,
        }


def effective_reserve(compaction: CompactionSettings) -> int:
    """Return R = max(reserveTokens, reserveTokensFloor) (`applyPiCompactionSettingsFromConfig`)."""
    return max(compaction.reserve_tokens, compaction.reserve_tokens_floor)


def thresholds_for(compaction: CompactionSettings, *, context_window: int) -> Thresholds:
    """Build the thresholds of an assistant from its compaction settings and window."""
    flush = compaction.memory_flush
    return Thresholds(
        context_window=int(context_window),
        reserve_tokens=effective_reserve(compaction),
        soft_threshold_tokens=flush.soft_threshold_tokens,
        flush_enabled=flush.enabled,
        force_flush_transcript_bytes=flush.force_flush_transcript_bytes,
    )


def has_flushed_this_cycle(*, memory_flush_compaction_count: int | None, compaction_count: int) -> bool:
    """Tell whether the flush already ran in this compaction cycle (NULL means never)."""
    return memory_flush_compaction_count is not None and memory_flush_compaction_count == compaction_count


def prompt_tokens_of(usage: Mapping[str, Any] | None) -> int:
    """Return the prompt side of an OpenClaw usage dict: input + cacheRead + cacheWrite."""
    if not usage:
        return 0
    return sum(_usage_count(usage.get(key)) for key in ("input", "cacheRead", "cacheWrite"))


def output_tokens_of(usage: Mapping[str, Any] | None) -> int:
    """Return the output tokens of an OpenClaw usage dict."""
    return _usage_count((usage or {}).get("output"))


def _usage_count(value: object) -> int:
    """Return a usage figure a model reported: floor of a finite number >= 0, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return int(value) if value >= 0 else 0


def projected_next_turn_tokens(
    *, last_prompt_tokens: int, last_output_tokens: int, prompt_estimate: int
) -> int:
    """Return the projected size of the next request (`runMemoryFlushIfNeeded`)."""
    return max(0, last_prompt_tokens) + max(0, last_output_tokens) + max(0, prompt_estimate)
