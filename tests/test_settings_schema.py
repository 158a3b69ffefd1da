"""Assistant settings: OpenClaw's names and defaults, and clear errors naming the bad key (pure)."""

from __future__ import annotations

import pytest

from openclaw_site.assistant_settings import (
    SettingsError,
    default_settings,
    parse_byte_size,
    validate_settings,
)
from openclaw_site.env import EnvError, env_bool, env_int, load_dotenv


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
    ],
)
def test_bad_settings_name_their_path(data, path):
    with pytest.raises(SettingsError) as caught:
        validate_settings(data)
    assert caught.value.path == path


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
