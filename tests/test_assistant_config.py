"""`Assistant.config`: the typed settings, parsed once per document and never stale (no database)."""

from __future__ import annotations

import logging

import pytest

from openclaw_site.models import Assistant
from openclaw_site.teams.assistant_settings import (
    SettingsError,
    check_fits_window,
    default_settings,
    parse_settings,
    smallest_window,
    validate_settings,
)


def test_config_is_the_parsed_settings_and_parsed_once():
    assistant = Assistant(settings=validate_settings({"compaction": {"reserveTokens": 30000}}))
    config = assistant.config
    assert config == parse_settings(assistant.settings)
    assert config.compaction.reserve_tokens == 30000
    assert assistant.config is config  # the same document is not parsed again


def test_config_follows_new_settings_assigned_or_edited_in_place():
    assistant = Assistant(settings=default_settings())
    assert assistant.config.pruning.mode == "cache-ttl"
    assistant.settings = validate_settings({"contextPruning": {"mode": "always"}})
    assert assistant.config.pruning.mode == "always"
    assistant.settings["contextPruning"]["mode"] = "off"
    assert assistant.config.pruning.mode == "off"


def test_a_partial_document_gets_the_defaults():
    assistant = Assistant(settings={"memorySearch": {"chunking": {"tokens": 12, "overlap": 6}}})
    assert (assistant.config.memory_search.chunking.tokens, assistant.config.compaction.reserve_tokens) == (
        12,
        16384,
    )


def test_a_stored_document_that_no_longer_validates_gives_the_defaults(caplog: pytest.LogCaptureFixture):
    assistant = Assistant(pk=7, settings={"contextPruning": {"ttl": "soon"}})
    with caplog.at_level(logging.WARNING, logger="openclaw_site.models"):
        assert assistant.config == parse_settings(None)
    assert "assistant 7 has invalid settings" in caplog.text
    assert "settings.contextPruning.ttl" in caplog.text


def test_smallest_window_is_the_first_window_the_settings_fit():
    settings = default_settings()
    smallest = smallest_window(settings)
    assert smallest == 40001  # the 20000-token reserve floor plus the 20000 recent tokens kept
    check_fits_window(settings, context_window=smallest)
    with pytest.raises(SettingsError):
        check_fits_window(settings, context_window=smallest - 1)
