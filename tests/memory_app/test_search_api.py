"""`GET /assistants/{slug}/search/` and `POST /assistants/{slug}/reindex/` (isolation and scopes
are covered with every other endpoint in tests/test_api_isolation.py)."""

from __future__ import annotations

import pytest

from memory_app.models import IndexState, MemoryChunk
from tests import factories
from tests.api_support import API, assert_error

pytestmark = pytest.mark.django_db


def test_search_returns_cited_results(
    api, world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"{API}/assistants/helper/memory/",
            {
                "path": "memory/2026-02-16.md",
                "content": "# Standup\nWe chose Postgres 16 for the heron service.\n",
            },
            format="json",
        )
    assert response.status_code == 201, response.content

    body = api.get(
        f"{API}/assistants/helper/search/", {"q": "which database for heron", "explain": "1"}
    ).json()

    assert body["mode"] == "hybrid" and body["requested_mode"] == "hybrid" and body["fallback"] is None
    assert body["provider"] == "openai" and body["model"] == "fake-embedding"
    [result] = body["results"]
    assert result["path"] == "memory/2026-02-16.md" and result["source"] == "memory"
    assert body["low_confidence"] is False
    assert (result["start_line"], result["end_line"]) == (1, 2)  # the final newline is not a line of text
    assert result["citation"] == "memory/2026-02-16.md#L1-L2"
    assert "Postgres 16" in result["snippet"] and result["session_id"] is None
    assert set(result["explain"]) >= {"vector_score", "text_score", "decay_multiplier", "mmr_position"}
    assert result["score"] == pytest.approx(
        0.7 * result["explain"]["vector_score"] + 0.3 * result["explain"]["text_score"], abs=1e-5
    )


def test_search_without_explain_has_no_explain(api, world, no_embeddings) -> None:
    factories.make_document(world.assistant, "MEMORY.md", "heron facts")
    from memory_app.index.rebuild import reindex_assistant

    reindex_assistant(world.assistant.pk)
    body = api.get(f"{API}/assistants/helper/search/", {"q": "heron"}).json()
    assert body["mode"] == "text" and body["fallback"] == "no_embedder"
    assert "explain" not in body["results"][0]


def test_search_knobs_pass_through(api, world, fake_embeddings) -> None:
    from memory_app.index.rebuild import reindex_assistant

    factories.make_document(world.assistant, "memory/2026-01-01.md", "ramen lunch")
    reindex_assistant(world.assistant.pk)
    body = api.get(
        f"{API}/assistants/helper/search/",
        {
            "q": "ramen",
            "decay": "true",
            "mmr": "1",
            "explain": "1",
            "min_score": "0",
            "max_results": "3",
            "sources": "memory",
            "mode": "hybrid",
            "snippet_mode": "best",
            "snippet_max_chars": "100",
        },
    ).json()
    [result] = body["results"]
    assert result["explain"]["decay_multiplier"] < 1 and result["explain"]["mmr_position"] == 1


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": "x", "max_results": "0"}, "max_results"),
        ({"q": "x", "min_score": "2"}, "min_score"),
        ({"q": "x", "sources": "memory,wiki"}, "sources"),
        ({"q": "x", "mode": "fuzzy"}, "mode"),
        ({"q": "x", "explain": "maybe"}, "explain"),
    ],
)
def test_bad_search_parameters_are_400(api, world, params, field) -> None:
    error = assert_error(api.get(f"{API}/assistants/helper/search/", params), 400, "validation_error")
    assert error["details"]["field"] == field


def test_an_unknown_search_parameter_is_400(api, world) -> None:
    error = assert_error(
        api.get(f"{API}/assistants/helper/search/", {"q": "x", "maxResults": "3"}), 400, "invalid_parameter"
    )
    assert error["details"]["unknown"] == ["maxResults"]


def test_search_never_returns_another_teams_memory(api, other_api, world, fake_embeddings) -> None:
    from memory_app.index.rebuild import reindex_assistant

    twin = factories.make_assistant(world.globex, "helper")
    factories.make_document(twin, "MEMORY.md", "globex launch code REDFOX")
    factories.make_document(world.assistant, "MEMORY.md", "acme launch code BLUEBIRD")
    reindex_assistant(twin.pk)
    reindex_assistant(world.assistant.pk)
    acme = api.get(f"{API}/assistants/helper/search/", {"q": "REDFOX launch code", "min_score": "0"}).json()
    globex = other_api.get(
        f"{API}/assistants/helper/search/", {"q": "BLUEBIRD launch code", "min_score": "0"}
    ).json()
    assert acme["results"] and all("BLUEBIRD" in r["snippet"] for r in acme["results"])
    assert globex["results"] and all("REDFOX" in r["snippet"] for r in globex["results"])
    assert_error(other_api.get(f"{API}/assistants/rival-not-here/search/", {"q": "x"}), 404, "not_found")


def test_reindex_returns_a_task_that_reports_progress(
    api, world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    for i in range(3):
        factories.make_document(world.assistant, f"memory/n{i}.md", f"note {i}")
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"{API}/assistants/helper/reindex/", {"full": True}, format="json")
    assert response.status_code == 202, response.content
    task = response.json()
    assert task["kind"] == "reindex" and task["objects"] == {"assistant": world.assistant.pk}

    body = api.get(f"{API}/tasks/{task['id']}/").json()

    assert body["state"] == "succeeded"
    assert body["progress"]["done"] == body["progress"]["total"] == 3
    assert body["result"]["entries"] == 3 and body["result"]["generations"] == [2]
    assert IndexState.objects.get(assistant=world.assistant).active_generation == 2
    assert MemoryChunk.objects.filter(assistant=world.assistant, generation=2).count() == 3


def test_reindex_refuses_bad_bodies(api, world) -> None:
    assert_error(
        api.post(f"{API}/assistants/helper/reindex/", {"full": "soon"}, format="json"),
        400,
        "validation_error",
    )
    assert_error(
        api.post(f"{API}/assistants/helper/reindex/", {"everything": True}, format="json"),
        400,
        "validation_error",
    )
