"""Input the database cannot hold or the parser cannot survive: each a clear 400, nothing written.

NUL characters and lone surrogates anywhere in a body or a query, JSON nested thousands of levels
deep, integers past what the database holds, absurd usage figures (docs/design.md, Limits and
refusals).
"""

from __future__ import annotations

import json

import pytest

from tests import factories
from tests.api_support import API, assert_error, snapshot

pytestmark = pytest.mark.django_db

NUL, SURROGATE = "\u0000", "\ud800"


@pytest.fixture
def messages_url(world) -> str:
    session = factories.make_session(world.assistant, "main")
    return f"{API}/sessions/{session.pk}/messages/"


def post_raw(api, url: str, body: str):
    return api.post(url, data=body.encode("utf-8", "surrogatepass"), content_type="application/json")


def refused(response, code: str, field: str | None = None) -> dict:
    error = assert_error(response, 400, code)
    if field is not None:
        assert error["details"]["field"] == field, error
    return error


@pytest.mark.parametrize(
    "body, field",
    [
        ({"role": "user", "content": f"a{NUL}b"}, "content"),
        (
            {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": NUL}]},
            "messages[1].content",
        ),
        ({"role": "user", "content": "ok", "details": {"note": f"x{NUL}"}}, "details.note"),
        ({"role": "user", "content": [{"type": "text", "text": NUL}]}, "content[0].text"),
        ({"role": "user", "content": "ok", "details": {f"key{NUL}": 1}}, f"details.key{NUL}"),
    ],
    ids=["content", "batch-item", "details", "text-block", "key"],
)
def test_a_nul_anywhere_in_a_message_is_a_400(api, messages_url, body, field):
    before = snapshot()
    error = refused(
        api.post(messages_url, data=json.dumps(body), content_type="application/json"), "invalid_text", field
    )
    assert "NUL" in error["message"]
    assert snapshot() == before


def test_a_lone_surrogate_in_content_is_a_400(api, messages_url):
    before = snapshot()
    body = json.dumps({"role": "user", "content": f"half {SURROGATE} a pair"})
    error = refused(post_raw(api, messages_url, body), "invalid_text", "content")
    assert "surrogate" in error["message"]
    assert snapshot() == before


def test_a_surrogate_pair_is_ordinary_text(api, messages_url):
    response = post_raw(api, messages_url, '{"role": "user", "content": "smile \\ud83d\\ude00"}')
    assert response.status_code == 201 and response.json()["messages"][0]["content"] == "smile \U0001f600"


@pytest.mark.parametrize("depth", [64, 3000, 100_000])
def test_deeply_nested_json_is_a_400(api, messages_url, depth):
    before = snapshot()
    body = '{"role": "user", "content": "x", "details": ' + "[" * depth + "]" * depth + "}"
    error = refused(post_raw(api, messages_url, body), "json_too_deep")
    assert "64 levels" in error["message"]
    assert snapshot() == before


def test_json_at_the_depth_limit_is_accepted(api, messages_url):
    nested = "[" * 63 + "]" * 63  # with the body object: 64 levels
    response = post_raw(api, messages_url, '{"role": "user", "content": "x", "details": ' + nested + "}")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("offset", ["1180591620717411303424", "9223372036854775808", "9007199254740992"])
def test_an_offset_past_any_database_integer_is_a_400(api, world, messages_url, offset):
    for url in (
        f"{API}/assistants/{world.assistant.slug}/sessions/",
        f"{API}/assistants/{world.assistant.slug}/memory/MEMORY.md/revisions/",
    ):
        refused(api.get(url, {"offset": offset}), "invalid_parameter", "offset")
    refused(api.get(messages_url, {"after_seq": offset}), "invalid_parameter", "after_seq")


def test_the_largest_offset_is_an_empty_page(api, world):
    response = api.get(f"{API}/assistants/{world.assistant.slug}/sessions/", {"offset": 2**53 - 1})
    assert response.status_code == 200 and response.json()["sessions"] == []


def test_a_nul_in_a_query_parameter_is_a_400(api, world):
    refused(
        api.get(f"{API}/assistants/{world.assistant.slug}/search/", {"q": f"a{NUL}b"}),
        "invalid_parameter",
        "q",
    )


def test_a_nul_in_a_memory_document_or_a_setting_is_a_400(api, world):
    before = snapshot()
    base = f"{API}/assistants/{world.assistant.slug}"
    refused(
        api.post(f"{base}/memory/", {"path": "MEMORY.md", "content": NUL}, format="json"),
        "invalid_text",
        "content",
    )
    refused(
        api.patch(f"{base}/", {"system_prompt": f"be{NUL}"}, format="json"), "invalid_text", "system_prompt"
    )
    refused(
        api.post(f"{API}/api-keys/", {"name": NUL, "scopes": ["admin"]}, format="json"),
        "invalid_text",
        "name",
    )
    assert snapshot() == before


@pytest.mark.parametrize(
    "usage, field",
    [
        ({"input": 1e30}, "usage.input"),
        ({"input": -1}, "usage.input"),
        ({"totalTokens": 10**10}, "usage.totalTokens"),
        ({"cost": {"total": 1e30}}, "usage.cost.total"),
        ({"input": "12"}, "usage.input"),
    ],
)
def test_absurd_usage_figures_are_refused(api, messages_url, usage, field):
    before = snapshot()
    body = {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "usage": usage}
    refused(api.post(messages_url, body, format="json"), "invalid_usage", field)
    assert snapshot() == before
