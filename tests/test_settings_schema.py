"""Assistant settings: OpenClaw's names and defaults, clear errors naming the bad key, and the
typed settings object built from them (pure)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from openclaw_site.platform.env import EnvError, env_bool, env_int, load_dotenv
from openclaw_site.teams.assistant_settings import (
    SCHEMA,
    AssistantSettings,
    ChunkingSettings,
    CompactionSettings,
    EmbeddingCacheSettings,
    Field,
    HardClear,
    HybridSettings,
    MemoryFlushSettings,
    MemorySearchSettings,
    MmrSettings,
    PruningSettings,
    QualityGuardSettings,
    QuerySettings,
    SessionSyncSettings,
    SettingsError,
    SoftTrim,
    SummarySettings,
    SyncSettings,
    TemporalDecaySettings,
    ToolMatch,
    check_fits_window,
    default_settings,
    parse_byte_size,
    parse_settings,
    validate_settings,
)


def test_defaults_are_openclaws():
    s = default_settings()
    assert s["compaction"]["reserveTokens"] == 16384
    assert s["compaction"]["reserveTokensFloor"] == 20000
    assert s["compaction"]["keepRecentTokens"] == 20000
    assert s["compaction"]["memoryFlush"]["softThresholdTokens"] == 4000
    assert s["compaction"]["memoryFlush"]["forceFlushTranscriptBytes"] == 2 * 1024 * 1024
    assert s["contextPruning"]["softTrim"] == {"maxChars": 4000, "headChars": 1500, "tailChars": 1500}
    assert s["memorySearch"]["query"]["maxResults"] == 6
    assert s["memorySearch"]["query"]["minScore"] == 0.35
    assert s["memorySearch"]["query"]["hybrid"]["mmr"] == {"enabled": False, "lambda": 0.7}
    assert s["memorySearch"]["query"]["hybrid"]["temporalDecay"] == {"enabled": False, "halfLifeDays": 30}


def test_partial_update_merges_onto_base():
    base = validate_settings({"compaction": {"reserveTokens": 30000}})
    merged = validate_settings({"contextPruning": {"mode": "always"}}, base=base)
    assert merged["compaction"]["reserveTokens"] == 30000
    assert merged["contextPruning"]["mode"] == "always"
    assert merged["contextPruning"]["ttl"] == "5m"


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"compaction": {"reserveToken": 1}}, "settings.compaction.reserveToken"),
        ({"compaction": {"reserveTokens": "big"}}, "settings.compaction.reserveTokens"),
        ({"compaction": {"reserveTokens": True}}, "settings.compaction.reserveTokens"),
        ({"compaction": {"recentTurnsPreserve": 13}}, "settings.compaction.recentTurnsPreserve"),
        ({"contextPruning": {"mode": "sometimes"}}, "settings.contextPruning.mode"),
        ({"contextPruning": {"softTrimRatio": 1.5}}, "settings.contextPruning.softTrimRatio"),
        ({"contextPruning": {"tools": {"deny": [1]}}}, "settings.contextPruning.tools.deny[0]"),
        ({"memorySearch": {"sources": ["memory", "web"]}}, "settings.memorySearch.sources[1]"),
        (
            {"memorySearch": {"chunking": {"tokens": 100, "overlap": 100}}},
            "settings.memorySearch.chunking.overlap",
        ),
        ({"memorySearch": "on"}, "settings.memorySearch"),
        (
            {"compaction": {"memoryFlush": {"forceFlushTranscriptBytes": "lots"}}},
            "settings.compaction.memoryFlush.forceFlushTranscriptBytes",
        ),
        ({"compaction": {"maxHistoryShare": 0.95}}, "settings.compaction.maxHistoryShare"),
        ({"compaction": {"maxHistoryShare": 0.05}}, "settings.compaction.maxHistoryShare"),
        ({"contextPruning": {"ttl": "soon"}}, "settings.contextPruning.ttl"),
        ({"contextPruning": {"ttl": -1}}, "settings.contextPruning.ttl"),
        (
            {"contextPruning": {"hardClear": {"placeholder": " "}}},
            "settings.contextPruning.hardClear.placeholder",
        ),
        # Sane maxima (docs/design.md, Limits and refusals): 1e30 parses as a float, 10**30 as an int.
        ({"compaction": {"reserveTokens": 1e30}}, "settings.compaction.reserveTokens"),
        ({"compaction": {"reserveTokens": 10**30}}, "settings.compaction.reserveTokens"),
        ({"compaction": {"reserveTokensFloor": 10**9}}, "settings.compaction.reserveTokensFloor"),
        ({"compaction": {"keepRecentTokens": 10**9}}, "settings.compaction.keepRecentTokens"),
        (
            {"compaction": {"memoryFlush": {"softThresholdTokens": 10**9}}},
            "settings.compaction.memoryFlush.softThresholdTokens",
        ),
        ({"compaction": {"timeoutSeconds": 10**7}}, "settings.compaction.timeoutSeconds"),
        (
            {"compaction": {"memoryFlush": {"forceFlushTranscriptBytes": 10**13}}},
            "settings.compaction.memoryFlush.forceFlushTranscriptBytes",
        ),
        (
            {"memorySearch": {"sync": {"sessions": {"deltaBytes": 10**13}}}},
            "settings.memorySearch.sync.sessions.deltaBytes",
        ),
    ],
)
def test_bad_settings_name_their_path(data, path):
    with pytest.raises(SettingsError) as caught:
        validate_settings(data)
    assert caught.value.path == path


@pytest.mark.parametrize(
    ("data", "window", "path"),
    [
        ({"compaction": {"reserveTokens": 150000}}, 128000, "settings.compaction.reserveTokens"),
        ({"compaction": {"reserveTokensFloor": 125000}}, 128000, "settings.compaction.reserveTokensFloor"),
        ({}, 16000, "settings.compaction.reserveTokensFloor"),  # the defaults reserve 24000
        ({"compaction": {"keepRecentTokens": 128000}}, 128000, "settings.compaction.keepRecentTokens"),
    ],
)
def test_token_settings_must_fit_the_context_window(data, window, path):
    with pytest.raises(SettingsError) as caught:
        check_fits_window(validate_settings(data), context_window=window)
    assert caught.value.path == path and str(window) in caught.value.message


def test_settings_that_leave_room_fit():
    check_fits_window(validate_settings({}), context_window=200000)
    small = {"compaction": {"reserveTokens": 2000, "reserveTokensFloor": 2000, "keepRecentTokens": 4000}}
    check_fits_window(validate_settings(small), context_window=16000)


def test_parse_settings_refuses_what_validation_refuses():
    with pytest.raises(SettingsError) as caught:
        parse_settings({"compaction": {"maxHistoryShare": 0.95}})
    assert caught.value.path == "settings.compaction.maxHistoryShare"


DEFAULTS = AssistantSettings(
    compaction=CompactionSettings(
        mode="safeguard",
        reserve_tokens=16384,
        reserve_tokens_floor=20000,
        keep_recent_tokens=20000,
        model=None,
        timeout_seconds=900,
        quality_guard=QualityGuardSettings(enabled=False, max_retries=1),
        memory_flush=MemoryFlushSettings(
            enabled=True,
            soft_threshold_tokens=4000,
            force_flush_transcript_bytes=2 * 1024 * 1024,
            prompt=None,
            system_prompt=None,
        ),
        summary=SummarySettings(
            identifier_policy="strict",
            identifier_instructions=None,
            custom_instructions=None,
            recent_turns_preserve=3,
            max_history_share=0.5,
        ),
    ),
    pruning=PruningSettings(
        mode="cache-ttl",
        ttl_ms=300_000,
        keep_last_assistants=3,
        soft_trim_ratio=0.3,
        hard_clear_ratio=0.5,
        min_prunable_tool_chars=50_000,
        soft_trim=SoftTrim(max_chars=4000, head_chars=1500, tail_chars=1500),
        hard_clear=HardClear(enabled=True, placeholder="[Old tool result content cleared]"),
        tools=ToolMatch(allow=(), deny=()),
    ),
    memory_search=MemorySearchSettings(
        enabled=True,
        sources=("memory", "sessions"),
        chunking=ChunkingSettings(tokens=400, overlap=80),
        session_chunking=ChunkingSettings(tokens=128, overlap=25),
        sync=SyncSettings(
            watch_debounce_ms=1500,
            sessions=SessionSyncSettings(delta_bytes=100000, delta_messages=50, post_compaction_force=True),
        ),
        query=QuerySettings(
            max_results=6,
            min_score=0.35,
            snippet_max_chars=700,
            snippet_mode="head",
            hybrid=HybridSettings(
                enabled=True,
                vector_weight=0.7,
                text_weight=0.3,
                candidate_multiplier=4,
                cjk_text_weight_scale=0.15,
                mmr=MmrSettings(enabled=False, lambda_=0.7),
                temporal_decay=TemporalDecaySettings(enabled=False, half_life_days=30.0),
            ),
        ),
        cache=EmbeddingCacheSettings(enabled=True, max_entries=None),
        citations="auto",
    ),
)


def test_the_typed_object_holds_every_default():
    assert parse_settings(None) == parse_settings({}) == parse_settings(default_settings()) == DEFAULTS


# One valid value other than the default for every leaf of the schema: each must reach the typed
# object, so a setting added to the schema without being carried into it fails here.
CHANGED: dict[str, Any] = {
    "compaction.mode": "default",
    "compaction.reserveTokens": 30000,
    "compaction.reserveTokensFloor": 0,
    "compaction.keepRecentTokens": 300,
    "compaction.maxHistoryShare": 0.9,
    "compaction.recentTurnsPreserve": 12,
    "compaction.identifierPolicy": "custom",
    "compaction.identifierInstructions": "Keep ticket numbers.",
    "compaction.customInstructions": "Focus on decisions.",
    "compaction.qualityGuard.enabled": True,
    "compaction.qualityGuard.maxRetries": 3,
    "compaction.model": "small-model",
    "compaction.timeoutSeconds": 60,
    "compaction.memoryFlush.enabled": False,
    "compaction.memoryFlush.softThresholdTokens": 10000,
    "compaction.memoryFlush.forceFlushTranscriptBytes": "3mb",
    "compaction.memoryFlush.prompt": "Save what matters.",
    "compaction.memoryFlush.systemPrompt": "Flush now.",
    "contextPruning.mode": "always",
    "contextPruning.ttl": "1h",
    "contextPruning.keepLastAssistants": 0,
    "contextPruning.softTrimRatio": 0.1,
    "contextPruning.hardClearRatio": 0.9,
    "contextPruning.minPrunableToolChars": 0,
    "contextPruning.softTrim.maxChars": 10,
    "contextPruning.softTrim.headChars": 6,
    "contextPruning.softTrim.tailChars": 6,
    "contextPruning.hardClear.enabled": False,
    "contextPruning.hardClear.placeholder": "[cleared]",
    "contextPruning.tools.allow": ["read*"],
    "contextPruning.tools.deny": ["exec"],
    "memorySearch.enabled": False,
    "memorySearch.sources": ["memory"],
    "memorySearch.chunking.tokens": 300,
    "memorySearch.chunking.overlap": 30,
    "memorySearch.chunking.sessions.tokens": 160,
    "memorySearch.chunking.sessions.overlap": 0,
    "memorySearch.sync.watchDebounceMs": 0,
    "memorySearch.sync.sessions.deltaBytes": 0,
    "memorySearch.sync.sessions.deltaMessages": 1,
    "memorySearch.sync.sessions.postCompactionForce": False,
    "memorySearch.query.maxResults": 10,
    "memorySearch.query.minScore": 0.0,
    "memorySearch.query.snippetMaxChars": 0,
    "memorySearch.query.snippetMode": "best",
    "memorySearch.query.hybrid.enabled": False,
    "memorySearch.query.hybrid.vectorWeight": 0.5,
    "memorySearch.query.hybrid.textWeight": 0.5,
    "memorySearch.query.hybrid.candidateMultiplier": 8,
    "memorySearch.query.hybrid.cjkTextWeightScale": 1,
    "memorySearch.query.hybrid.mmr.enabled": True,
    "memorySearch.query.hybrid.mmr.lambda": 0.5,
    "memorySearch.query.hybrid.temporalDecay.enabled": True,
    "memorySearch.query.hybrid.temporalDecay.halfLifeDays": 7,
    "memorySearch.cache.enabled": False,
    "memorySearch.cache.maxEntries": 1000,
    "memorySearch.citations": "off",
    "memoryConsolidation.schedule": "off",
    "memoryConsolidation.hour": 22,
    "memoryConsolidation.autoApply": ["merge"],
}


def _leaf_paths(schema: dict[str, Any], prefix: str = "") -> list[str]:
    paths = []
    for key, node in schema.items():
        path = f"{prefix}{key}"
        paths += [path] if isinstance(node, Field) else _leaf_paths(node, f"{path}.")
    return paths


def _set(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    *parents, leaf = path.split(".")
    target = changed
    for key in parents:
        target = target[key]
    target[leaf] = value
    return changed


def test_the_change_table_covers_every_leaf_of_the_schema():
    assert sorted(CHANGED) == sorted(_leaf_paths(SCHEMA))


@pytest.mark.parametrize("path", sorted(CHANGED))
def test_every_setting_reaches_the_typed_object(path):
    assert parse_settings(_set(default_settings(), path, CHANGED[path])) != DEFAULTS


def test_units_are_converted_once():
    config = parse_settings(
        {
            "compaction": {"memoryFlush": {"forceFlushTranscriptBytes": "3mb"}},
            "contextPruning": {"ttl": "1.5h"},
            "memorySearch": {"chunking": {"tokens": 300, "overlap": 30, "sessions": {"tokens": 100}}},
        }
    )
    assert config.compaction.memory_flush.force_flush_transcript_bytes == 3 * 1024 * 1024
    assert config.pruning.ttl_ms == 5_400_000
    assert parse_settings({"contextPruning": {"ttl": "5"}}).pruning.ttl_ms == 300_000  # minutes
    assert parse_settings({"contextPruning": {"ttl": 1500}}).pruning.ttl_ms == 1500  # ms
    assert config.memory_search.chunking == ChunkingSettings(tokens=300, overlap=30)
    # Transcripts have their own default (128/25); a null in chunking.sessions means the notes' value.
    assert config.memory_search.session_chunking == ChunkingSettings(tokens=100, overlap=25)
    own_overlap = parse_settings({"memorySearch": {"chunking": {"sessions": {"overlap": 0}}}})
    assert own_overlap.memory_search.session_chunking == ChunkingSettings(tokens=128, overlap=0)
    notes = parse_settings(
        {
            "memorySearch": {
                "chunking": {"tokens": 300, "overlap": 30, "sessions": {"tokens": None, "overlap": None}}
            }
        }
    )
    assert notes.memory_search.session_chunking == ChunkingSettings(tokens=300, overlap=30)


def test_byte_sizes_parse_like_openclaw():
    assert parse_byte_size("3mb") == 3 * 1024 * 1024
    assert parse_byte_size("512kb") == 512 * 1024
    assert parse_byte_size(100) == 100
    assert parse_byte_size("many") is None


def test_env_helpers_fail_loudly(monkeypatch):
    monkeypatch.setenv("X_BOOL", "perhaps")
    with pytest.raises(EnvError, match="X_BOOL"):
        env_bool("X_BOOL", False)
    monkeypatch.setenv("X_INT", "-3")
    with pytest.raises(EnvError, match="at least 0"):
        env_int("X_INT", 1, minimum=0)


def test_dotenv_never_overrides_the_environment(tmp_path, monkeypatch):
    env_file = tmp_path / ".env"
    env_file.write_text("# comment\nX_ONE=from-file\nX_TWO='quoted'  # note\n")
    monkeypatch.setenv("X_ONE", "from-env")
    monkeypatch.delenv("X_TWO", raising=False)
    load_dotenv(env_file)
    import os

    assert os.environ["X_ONE"] == "from-env"
    assert os.environ["X_TWO"] == "quoted"
    monkeypatch.delenv("X_TWO")
