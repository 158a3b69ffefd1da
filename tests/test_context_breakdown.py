"""The context breakdown: /context/ and the session page's gauge split the window the same way."""

from __future__ import annotations

import re

import pytest

from tests import factories
from tests.test_views_sessions import _compacted_session
from tests.views_support import HX, signed_in

pytestmark = pytest.mark.django_db

PARTS = ["system_prompt", "memory_files", "tools", "summary", "messages", "free"]


def test_context_reports_each_part_and_the_free_rest(api, world, llm):
    factories.make_document(world.assistant, "MEMORY.md", "The launch is on 2026-12-15.\n" * 40)
    session = _compacted_session(world, llm)
    body = api.get(f"/api/v1/sessions/{session.pk}/context/").json()
    parts = body["breakdown"]
    assert list(parts) == PARTS
    assert all(parts[name] > 0 for name in PARTS)
    assert sum(parts.values()) == body["context_window"]
    # Corrected part by part like the whole, the parts add up to the request's estimate (± rounding).
    assert abs(sum(parts[name] for name in PARTS[:-1]) - body["estimated_tokens"]) <= len(PARTS)


def test_a_fresh_session_has_no_summary_or_memory_files(api, world):
    session = factories.make_session(world.assistant)
    parts = api.get(f"/api/v1/sessions/{session.pk}/context/").json()["breakdown"]
    assert parts["summary"] == parts["memory_files"] == parts["messages"] == 0
    assert parts["system_prompt"] > 0 and parts["tools"] > 0


def test_the_gauge_shows_the_same_split(api, world, llm):
    session = _compacted_session(world, llm)
    parts = api.get(f"/api/v1/sessions/{session.pk}/context/").json()["breakdown"]
    gauge = signed_in(world.vera).get(f"/sessions/{session.pk}/gauge/", **HX).content.decode()
    assert "Where the window goes" in gauge
    for label in ["System prompt", "Tool definitions", "Summary", "Messages", "Free"]:
        assert label in gauge
    shown = dict(re.findall(r'title="([^":]+): (\d+) tokens"', gauge))
    assert int(shown["Summary"]) == parts["summary"] and int(shown["Messages"]) == parts["messages"]
