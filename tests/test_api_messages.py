"""POST/GET /sessions/{id}/messages/: validation, batches, idempotency, size limits, paging."""

from __future__ import annotations

import json
import re

import pytest
from django.db import transaction

from openclaw_site.models import IdempotencyRecord
from sessions_app.models import CompactionEntry, Message, Session
from sessions_app.transcript import lock_session, take_seq
from tests import factories
from tests.api_support import API, assert_error, post_json, snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(world) -> Session:
    return factories.make_session(world.assistant, "main")


def url(session: Session) -> str:
    return f"{API}/sessions/{session.pk}/messages/"


def stored(session: Session) -> list[tuple[int, str]]:
    return list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "role"))


def test_a_single_message_is_stored_with_seq_and_entry_id(api, session):
    response = api.post(url(session), {"role": "user", "content": "hello"}, format="json")
    assert response.status_code == 201
    [message] = response.json()["messages"]
    assert message["seq"] == 1 and message["role"] == "user" and message["content"] == "hello"
    assert re.fullmatch(r"[0-9a-f]{8}", message["entry_id"]) and message["entryId"] == message["entry_id"]
    row = Message.objects.get(session=session)
    assert (row.pk, row.seq, row.entry_id) == (message["id"], 1, message["entry_id"])
    session.refresh_from_db()
    assert session.last_seq == 1


def test_every_role_and_block_kind_round_trips(api, session):
    messages = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"p": 1}},
            ],
            "usage": {"input": 10, "output": 5, "totalTokens": 15},
            "stopReason": "toolUse",
            "model": "m1",
        },
        {
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "read",
            "content": [{"type": "text", "text": "ok"}],
            "isError": False,
        },
    ]
    response = api.post(url(session), {"messages": messages}, format="json")
    assert response.status_code == 201
    out = response.json()["messages"]
    assert [m["seq"] for m in out] == [1, 2, 3, 4]
    assert (
        out[2]["usage"] == {"input": 10, "output": 5, "totalTokens": 15} and out[2]["stopReason"] == "toolUse"
    )
    assert (out[3]["toolCallId"], out[3]["toolName"], out[3]["isError"]) == ("call_1", "read", False)
    listing = api.get(url(session)).json()["entries"]
    assert [e["message"]["role"] for e in listing] == ["system", "user", "assistant", "toolResult"]
    assert listing[1]["message"]["content"][1]["mimeType"] == "image/png"


def test_an_ingested_timestamp_is_kept(api, session):
    iso = api.post(
        url(session), {"role": "user", "content": "a", "timestamp": "2026-01-02T03:04:05Z"}, format="json"
    )
    ms = api.post(url(session), {"role": "user", "content": "b", "timestamp": 1767323045000}, format="json")
    assert iso.json()["messages"][0]["timestamp"] == 1767323045000
    assert ms.json()["messages"][0]["created_at"].startswith("2026-01-02T03:04:05")


@pytest.mark.parametrize(
    "body, code, field",
    [
        ({"role": "wizard", "content": "x"}, "invalid_role", "role"),
        ({"content": "x"}, "invalid_role", "role"),
        ({"role": "toolResult", "toolName": "read", "content": "x"}, "missing_tool_call_id", "toolCallId"),
        ({"role": "toolResult", "toolCallId": "c1", "content": "x"}, "missing_tool_name", "toolName"),
        ({"role": "user", "content": 42}, "invalid_content", "content"),
        (
            {"role": "user", "content": [{"type": "toolCall", "id": "1", "name": "x", "arguments": {}}]},
            "invalid_content",
            "content[0]",
        ),
        ({"role": "user", "content": "x", "timestamp": "yesterday"}, "invalid_timestamp", "timestamp"),
        ({"role": "user", "content": "x", "colour": "red"}, "invalid_message", "colour"),
        ({"role": "user", "content": "x", "respond": "yes"}, "invalid_message", "respond"),
        ({"role": "assistant", "content": "x", "respond": True}, "invalid_message", "respond"),
    ],
)
def test_invalid_messages_are_rejected_with_their_field(api, session, body, code, field):
    before = snapshot()
    error = assert_error(api.post(url(session), body, format="json"), 400, code)
    assert error["details"]["field"] == field
    assert snapshot() == before


def test_one_bad_message_rejects_the_whole_batch(api, session):
    factories.add_messages(session, {"role": "user", "content": "already here"})
    batch = {
        "messages": [
            {"role": "user", "content": "fine"},
            {"role": "assistant", "content": "fine too"},
            {"role": "toolResult", "toolName": "read", "content": "no call id"},
            {"role": "user", "content": "never stored"},
        ]
    }
    error = assert_error(api.post(url(session), batch, format="json"), 400, "missing_tool_call_id")
    assert error["details"] == {"field": "toolCallId", "index": 2}
    assert error["message"].startswith("messages[2]:")
    assert stored(session) == [(1, "user")]
    session.refresh_from_db()
    assert session.last_seq == 1


@pytest.mark.parametrize(
    "body, code",
    [
        ({"messages": []}, "invalid_message"),
        ({"messages": "nope"}, "invalid_message"),
        ({"messages": [{"role": "user", "content": "x"}], "extra": 1}, "invalid_message"),
        ({"messages": [{"role": "user", "content": "x", "respond": True}]}, "invalid_message"),
        ({"messages": ["not an object"]}, "invalid_message"),
    ],
)
def test_malformed_batches_are_rejected(api, session, body, code):
    assert_error(api.post(url(session), body, format="json"), 400, code)
    assert stored(session) == []


def test_malformed_json_is_a_400(api, session):
    response = api.post(url(session), data='{"role": "user", "content": ', content_type="application/json")
    assert_error(response, 400, "malformed_json")
    assert stored(session) == []


def test_a_body_that_is_not_an_object_is_a_400(api, session):
    assert_error(post_json(api, url(session), ["user", "hi"]), 400, "invalid_body")
    assert_error(post_json(api, url(session), "hi"), 400, "invalid_body")


def test_a_message_over_the_size_limit_is_a_413(api, session, settings):
    settings.MAX_MESSAGE_BYTES = 2000
    response = api.post(url(session), {"role": "user", "content": "x" * 3000}, format="json")
    assert_error(response, 413, "payload_too_large")
    batch = {"messages": [{"role": "user", "content": "small"}, {"role": "user", "content": "y" * 3000}]}
    error = assert_error(api.post(url(session), batch, format="json"), 413, "payload_too_large")
    assert error["details"]["index"] == 1
    assert stored(session) == []


def test_a_request_over_the_size_limit_is_a_413_before_parsing(api, session, settings):
    settings.MAX_REQUEST_BYTES = 4096
    body = {"messages": [{"role": "user", "content": "z" * 1000} for _ in range(5)]}
    error = assert_error(api.post(url(session), body, format="json"), 413, "payload_too_large")
    assert error["details"]["limit"] == 4096
    # Not even malformed JSON is parsed once the body is too large.
    assert_error(
        api.post(url(session), data="{" * 5000, content_type="application/json"), 413, "payload_too_large"
    )
    assert stored(session) == []


def test_the_default_request_limit_applies(api, session):
    from django.conf import settings

    body = json.dumps({"role": "user", "content": "x" * (settings.MAX_REQUEST_BYTES + 10)})
    assert_error(api.post(url(session), data=body, content_type="application/json"), 413, "payload_too_large")
    assert stored(session) == []


def test_more_messages_than_the_batch_limit_is_a_413(api, session, settings):
    settings.MAX_BATCH_MESSAGES = 3
    body = {"messages": [{"role": "user", "content": str(i)} for i in range(4)]}
    assert_error(api.post(url(session), body, format="json"), 413, "payload_too_large")
    body["messages"].pop()
    assert api.post(url(session), body, format="json").status_code == 201


def test_respond_without_a_configured_model_is_a_503_and_stores_nothing(api, session, settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "", ""
    error = assert_error(
        api.post(url(session), {"role": "user", "content": "hi", "respond": True}, format="json"),
        503,
        "model_not_configured",
    )
    assert "LLM_BASE_URL" in error["message"]
    assert stored(session) == []
    # respond: false is just a stored message.
    assert (
        api.post(url(session), {"role": "user", "content": "hi", "respond": False}, format="json").status_code
        == 201
    )


class TestIdempotency:
    def test_a_retry_with_the_same_key_replays_the_first_response(self, api, session):
        body = {
            "messages": [{"role": "user", "content": "once"}, {"role": "assistant", "content": "only once"}]
        }
        first = api.post(url(session), body, format="json", HTTP_IDEMPOTENCY_KEY="retry-1")
        second = api.post(url(session), body, format="json", HTTP_IDEMPOTENCY_KEY="retry-1")
        assert first.status_code == second.status_code == 201
        assert second.json() == first.json()
        assert second["Idempotent-Replayed"] == "true" and not first.has_header("Idempotent-Replayed")
        assert stored(session) == [(1, "user"), (2, "assistant")]

    def test_the_same_key_with_another_body_is_a_409(self, api, session):
        api.post(url(session), {"role": "user", "content": "first"}, format="json", HTTP_IDEMPOTENCY_KEY="k")
        response = api.post(
            url(session), {"role": "user", "content": "second"}, format="json", HTTP_IDEMPOTENCY_KEY="k"
        )
        assert_error(response, 409, "idempotency_conflict")
        assert stored(session) == [(1, "user")]

    def test_the_same_key_on_another_session_is_a_409(self, api, session, world):
        other = factories.make_session(world.assistant, "other")
        body = {"role": "user", "content": "same"}
        api.post(url(session), body, format="json", HTTP_IDEMPOTENCY_KEY="k")
        assert_error(
            api.post(url(other), body, format="json", HTTP_IDEMPOTENCY_KEY="k"), 409, "idempotency_conflict"
        )
        assert stored(other) == []

    def test_keys_are_per_team(self, api, other_api, session, world):
        rival_session = factories.make_session(world.other_assistant, "main")
        body = {"role": "user", "content": "same"}
        assert api.post(url(session), body, format="json", HTTP_IDEMPOTENCY_KEY="shared").status_code == 201
        response = other_api.post(url(rival_session), body, format="json", HTTP_IDEMPOTENCY_KEY="shared")
        assert response.status_code == 201 and not response.has_header("Idempotent-Replayed")

    def test_a_rejected_request_does_not_use_up_its_key(self, api, session):
        bad = api.post(
            url(session), {"role": "wizard", "content": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="k2"
        )
        assert_error(bad, 400, "invalid_role")
        assert IdempotencyRecord.objects.count() == 0
        good = api.post(
            url(session), {"role": "user", "content": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="k2"
        )
        assert good.status_code == 201

    def test_key_order_in_the_body_does_not_matter(self, api, session):
        api.post(
            url(session),
            data='{"role": "user", "content": "x"}',
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY="order",
        )
        again = api.post(
            url(session),
            data='{"content": "x",   "role": "user"}',
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY="order",
        )
        assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
        assert len(stored(session)) == 1

    def test_an_overlong_key_is_a_400(self, api, session):
        response = api.post(
            url(session), {"role": "user", "content": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="k" * 201
        )
        assert_error(response, 400, "invalid_idempotency_key")
        assert stored(session) == []


class TestTranscriptRead:
    @pytest.fixture
    def transcript(self, session) -> Session:
        factories.add_messages(
            session, {"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}
        )
        with transaction.atomic():
            locked = lock_session(session.pk)
            first = Message.objects.get(session=session, seq=2)
            CompactionEntry.objects.create(
                session=locked,
                seq=take_seq(locked),
                summary="summary of one",
                first_kept=first,
                first_kept_entry_id=first.entry_id,
                tokens_before=100,
                trigger="manual",
                created_at=first.created_at,
            )
            locked.save(update_fields=["last_seq"])
        factories.add_messages(
            session,
            {"role": "assistant", "content": "flush note", "silent": True},
            {"role": "user", "content": "four"},
            {"role": "assistant", "content": "five"},
        )
        return session

    def test_messages_and_compactions_come_in_seq_order(self, api, transcript):
        body = api.get(url(transcript) + "?include_silent=1").json()
        assert [(e["seq"], e["type"]) for e in body["entries"]] == [
            (1, "message"),
            (2, "message"),
            (3, "compaction"),
            (4, "message"),
            (5, "message"),
            (6, "message"),
        ]
        assert body["entries"][2]["summary"] == "summary of one"
        assert body["entries"][2]["firstKeptEntryId"] == body["entries"][1]["id"]
        assert body["last_seq"] == 6 and body["has_more"] is False and body["next_after_seq"] is None

    def test_silent_messages_are_hidden_unless_asked_for(self, api, transcript):
        entries = api.get(url(transcript)).json()["entries"]
        assert [e["seq"] for e in entries] == [1, 2, 3, 5, 6]
        assert api.get(url(transcript) + "?include_silent=true").json()["entries"][3]["silent"] is True

    def test_paging_by_after_seq(self, api, transcript):
        page = api.get(url(transcript) + "?include_silent=1&limit=2").json()
        assert (
            [e["seq"] for e in page["entries"]] == [1, 2] and page["has_more"] and page["next_after_seq"] == 2
        )
        page = api.get(
            url(transcript) + f"?include_silent=1&limit=2&after_seq={page['next_after_seq']}"
        ).json()
        assert [e["seq"] for e in page["entries"]] == [3, 4] and page["next_after_seq"] == 4
        page = api.get(url(transcript) + "?include_silent=1&limit=2&after_seq=4").json()
        assert [e["seq"] for e in page["entries"]] == [5, 6] and page["has_more"] is False

    @pytest.mark.parametrize(
        "query", ["after_seq=abc", "after_seq=-1", "limit=0", "limit=5000", "include_silent=maybe"]
    )
    def test_bad_parameters_are_a_400(self, api, transcript, query):
        assert_error(api.get(url(transcript) + "?" + query), 400, "invalid_parameter")
