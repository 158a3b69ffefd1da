"""The `memory_search` agent tool returns OpenClaw's result JSON (docs/openclaw-behaviour.md §4.10)."""

from __future__ import annotations

import json

import pytest

from memory_app.index.rebuild import reindex_assistant
from memory_app.search.tool import citations_enabled, memory_search
from tests import factories
from tests.fake_openai import FakeOpenAI, error_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def notes(world, fake_embeddings):
    factories.make_document(
        world.assistant,
        "memory/2026-02-16.md",
        "# Standup\n\nWe picked Postgres 16 for heron.\nOwner: Maria.",
    )
    factories.make_document(world.assistant, "MEMORY.md", "Heron is the billing service.")
    reindex_assistant(world.assistant.pk)
    return world.assistant


def test_results_carry_lines_scores_and_citations(notes) -> None:
    payload = json.loads(memory_search({"query": "heron postgres"}, assistant=notes))
    first = payload["results"][0]
    assert set(first) == {"path", "startLine", "endLine", "score", "snippet", "source", "citation", "corpus"}
    assert first["path"] == "memory/2026-02-16.md" and (first["startLine"], first["endLine"]) == (1, 4)
    assert first["citation"] == "memory/2026-02-16.md#L1-L4"
    assert first["snippet"].endswith("\n\nSource: memory/2026-02-16.md#L1-L4")
    assert (first["source"], first["corpus"]) == ("memory", "memory")
    assert payload["provider"] == "openai" and payload["model"] == "fake-embedding"
    assert payload["citations"] == "on" and payload["mode"] == "hybrid"
    assert payload["debug"]["backend"] == "builtin" and payload["debug"]["hits"] == len(payload["results"])
    scores = [r["score"] for r in payload["results"]]
    assert scores == sorted(scores, reverse=True)


def test_the_text_is_pretty_printed_json(notes) -> None:
    text = memory_search({"query": "heron"}, assistant=notes)
    assert text.startswith('{\n  "results": [')


def test_citations_are_off_in_group_sessions(notes) -> None:
    payload = json.loads(memory_search({"query": "heron"}, assistant=notes, session_key="telegram:group:42"))
    assert payload["citations"] == "off"
    assert all("citation" not in r and "Source:" not in r["snippet"] for r in payload["results"])
    assert citations_enabled("auto", "dm-alice") is True
    assert citations_enabled("auto", "slack:channel:ops") is False
    assert citations_enabled("on", "team:group:1") is True
    assert citations_enabled("off", None) is False


def test_max_results_and_min_score(notes) -> None:
    one = json.loads(memory_search({"query": "heron", "maxResults": 1, "minScore": 0}, assistant=notes))
    assert len(one["results"]) == 1
    none = json.loads(memory_search({"query": "heron", "minScore": 1, "corpus": "all"}, assistant=notes))
    # Nothing scores 1: only keyword-backed results fill the slots.
    assert none["results"] and all("heron" in r["snippet"].lower() for r in none["results"])


def test_embedding_failure_answers_from_text_and_says_so(notes, fake_embeddings: FakeOpenAI) -> None:
    fake_embeddings.embedding_errors.append(error_reply(400, "embedding model unavailable"))
    payload = json.loads(memory_search({"query": "heron postgres"}, assistant=notes))
    assert payload["mode"] == "text" and "embedding model unavailable" in payload["fallback"]
    assert payload["results"][0]["path"] == "memory/2026-02-16.md"


def test_bad_arguments_are_answers_not_exceptions(notes) -> None:
    assert json.loads(memory_search({}, assistant=notes)) == {"results": [], "error": "query required"}
    assert "error" in json.loads(memory_search({"query": "x", "maxResults": "many"}, assistant=notes))
    assert "error" in json.loads(memory_search({"query": "x", "corpus": "web"}, assistant=notes))
    assert json.loads(memory_search({"query": "x", "corpus": "wiki"}, assistant=notes))["results"] == []


def test_a_database_failure_reports_unavailable(notes, monkeypatch) -> None:
    from django.db import DatabaseError

    from memory_app.search import tool as search_tool

    def broken(**kwargs):
        raise DatabaseError("could not connect: 429 quota exceeded")

    monkeypatch.setattr(search_tool, "search_memory", broken)
    payload = json.loads(memory_search({"query": "heron"}, assistant=notes))
    assert payload["disabled"] is True and payload["unavailable"] is True and payload["results"] == []
    assert "quota" in payload["warning"] and payload["action"].startswith("Top up")


def test_another_assistant_finds_nothing(notes, world) -> None:
    payload = json.loads(memory_search({"query": "heron postgres"}, assistant=world.other_assistant))
    assert payload["results"] == []
