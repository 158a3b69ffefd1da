"""Threshold arithmetic from one effective reserve (docs/design.md §D2, docs/openclaw-behaviour.md §2.2)."""

from __future__ import annotations

from typing import Any

from openclaw_site.teams.assistant_settings import (
    CompactionSettings,
    default_settings,
    parse_settings,
    validate_settings,
)
from sessions_app.context.thresholds import (
    Thresholds,
    effective_reserve,
    has_flushed_this_cycle,
    projected_next_turn_tokens,
    thresholds_for,
)


def compaction(document: Any) -> CompactionSettings:
    """Return the typed `compaction` settings of a settings document (validated, defaults filled)."""
    return parse_settings(document).compaction


def test_defaults_flush_at_176000_and_compact_above_180000():
    thresholds = thresholds_for(compaction(default_settings()), context_window=200000)
    assert thresholds.reserve_tokens == 20000  # max(16384, floor 20000)
    assert thresholds.flush_threshold == 176000
    assert thresholds.compaction_threshold == 180000
    assert not thresholds.should_compact(180000)  # strictly greater (Pi shouldCompact)
    assert thresholds.should_compact(180001)


def test_a_larger_reserve_tokens_moves_both_thresholds():
    settings = validate_settings({"compaction": {"reserveTokens": 30000}})
    thresholds = thresholds_for(compaction(settings), context_window=200000)
    assert thresholds.reserve_tokens == 30000
    assert thresholds.flush_threshold == 166000
    assert thresholds.compaction_threshold == 170000
    # OpenClaw used the floor for the flush: 176000 would lie above its 170000 compaction point.
    assert thresholds.flush_threshold < thresholds.compaction_threshold


def test_floor_zero_leaves_pi_reserve_and_soft_threshold_moves_only_the_flush():
    settings = validate_settings(
        {"compaction": {"reserveTokensFloor": 0, "memoryFlush": {"softThresholdTokens": 10000}}}
    )
    thresholds = thresholds_for(compaction(settings), context_window=128000)
    assert effective_reserve(compaction(settings)) == 16384
    assert thresholds.compaction_threshold == 128000 - 16384
    assert thresholds.flush_threshold == 128000 - 16384 - 10000


def test_flush_is_inclusive_and_once_per_cycle():
    thresholds = thresholds_for(compaction(default_settings()), context_window=200000)
    assert thresholds.flush_reason(projected_tokens=175999, transcript_bytes=0, already_flushed=False) is None
    assert (
        thresholds.flush_reason(projected_tokens=176000, transcript_bytes=0, already_flushed=False)
        == "tokens"
    )
    assert thresholds.flush_reason(projected_tokens=190000, transcript_bytes=0, already_flushed=True) is None


def test_force_flush_by_transcript_bytes_and_its_off_switch():
    thresholds = thresholds_for(compaction(default_settings()), context_window=200000)
    assert thresholds.force_flush_transcript_bytes == 2 * 1024 * 1024
    assert (
        thresholds.flush_reason(projected_tokens=10, transcript_bytes=2 * 1024 * 1024, already_flushed=False)
        == "transcript_bytes"
    )
    off = thresholds_for(
        compaction({"compaction": {"memoryFlush": {"forceFlushTranscriptBytes": 0}}}),
        context_window=200000,
    )
    assert off.flush_reason(projected_tokens=10, transcript_bytes=10**9, already_flushed=False) is None
    text = thresholds_for(
        compaction({"compaction": {"memoryFlush": {"forceFlushTranscriptBytes": "3mb"}}}),
        context_window=200000,
    )
    assert text.force_flush_transcript_bytes == 3 * 1024 * 1024


def test_disabled_flush_never_fires():
    settings = validate_settings({"compaction": {"memoryFlush": {"enabled": False}}})
    thresholds = thresholds_for(compaction(settings), context_window=200000)
    assert (
        thresholds.flush_reason(projected_tokens=199000, transcript_bytes=10**9, already_flushed=False)
        is None
    )


def test_null_flush_count_means_never_flushed():
    assert not has_flushed_this_cycle(memory_flush_compaction_count=None, compaction_count=0)
    assert has_flushed_this_cycle(memory_flush_compaction_count=0, compaction_count=0)
    assert not has_flushed_this_cycle(memory_flush_compaction_count=0, compaction_count=1)


def test_projection_adds_last_prompt_output_and_new_prompt():
    assert (
        projected_next_turn_tokens(last_prompt_tokens=170000, last_output_tokens=2000, prompt_estimate=4000)
        == 176000
    )
    small = Thresholds(
        context_window=16000,
        reserve_tokens=20000,
        soft_threshold_tokens=4000,
        flush_enabled=True,
        force_flush_transcript_bytes=2 * 1024 * 1024,
    )
    assert small.flush_threshold == 0 and small.compaction_threshold == 0
    assert not small.should_compact(15000)  # a window below the reserve never compacts by threshold
    assert small.flush_reason(projected_tokens=15000, transcript_bytes=0, already_flushed=False) is None
