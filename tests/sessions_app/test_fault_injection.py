"""Model faults through the scripted OpenAI-compatible server, during a turn and during a compaction.

Every fault (a timeout, 429, 500, a 200 with malformed JSON, a context overflow) gets the status
and code of docs/design.md's error table, and the stored transcript is asserted exactly: a turn
keeps the user's message and one assistant error message; a failed compaction leaves the history
as it was, and its message says what (if anything) its memory flush wrote.
"""

from __future__ import annotations

import pytest

from memory_app.models import MemoryDocument
from providers.chat import reset_providers
from sessions_app.models import CompactionEntry, CompactionRun, Message
from tests import factories
from tests.api_support import API, assert_error
from tests.fake_openai import Reply, delay_reply, error_reply, malformed_reply, text_reply
from tests.messages import assistant, user
from tests.sessions_app.test_engine_api import long_session, say

pytestmark = pytest.mark.django_db

OVERFLOW = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
)
FAULTS: dict[str, Reply] = {
    "timeout": delay_reply(3, text_reply("too late")),
    "429": error_reply(429, "Rate limit reached for requests", code="rate_limit_exceeded", type="requests"),
    "500": error_reply(500, "The server had an error while processing your request."),
    "malformed": malformed_reply(),
    "overflow": error_reply(400, OVERFLOW, code="context_length_exceeded"),
}
TURN_ERRORS = {
    "timeout": (504, "model_timeout"),
    "429": (502, "model_error"),
    "500": (502, "model_error"),
    "malformed": (502, "model_error"),
    "overflow": (422, "context_overflow"),
}


@pytest.fixture
def faulty(llm, settings):
    """The model answers every request with one fault."""
    settings.LLM_TIMEOUT_SECONDS = 0.5
    reset_providers()

    def use(fault: str) -> None:
        llm.default_chat = lambda request: FAULTS[fault]

    return use


def transcript(session) -> list[tuple]:
    return list(
        Message.objects.filter(session=session)
        .order_by("seq")
        .values_list("seq", "role", "content", "stop_reason", "silent", "flush_turn")
    )


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_during_a_turn_stores_the_message_and_one_error(api, world, faulty, fault):
    session = long_session(world, turns=1)
    before = transcript(session)
    faulty(fault)
    response = say(api, session, "are you there?")
    status, code = TURN_ERRORS[fault]
    error = assert_error(response, status, code)
    after = transcript(session)
    assert after[: len(before)] == before
    [(user_seq, *user), (error_seq, role, content, stop, silent, flush)] = after[len(before) :]
    assert user == ["user", "are you there?", "", False, False]
    assert (error_seq, role, content, stop, silent, flush) == (
        user_seq + 1,
        "assistant",
        [],
        "error",
        False,
        False,
    )
    assert [m["seq"] for m in error["details"]["messages"]] == [user_seq, error_seq]
    stored_error = Message.objects.get(session=session, seq=error_seq)
    assert stored_error.error_message == error["details"]["provider_message"]
    assert not CompactionEntry.objects.filter(session=session).exists()


def test_a_malformed_answer_says_so(api, world, faulty):
    session = long_session(world, turns=1)
    faulty("malformed")
    error = assert_error(say(api, session, "hi"), 502, "model_error")
    assert "malformed response" in error["message"]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_during_a_compaction_leaves_the_history_as_it_was(api, world, faulty, fault):
    session = long_session(world)
    factories.add_messages(session, user("We decided to deploy on Fridays."), assistant("Noted."))
    before = transcript(session)
    faulty(fault)
    response = api.post(f"{API}/sessions/{session.pk}/compact/", {}, format="json")
    error = assert_error(response, 502, "compaction_failed")
    assert transcript(session) == before
    assert not CompactionEntry.objects.filter(session=session).exists()
    run = CompactionRun.objects.get(session=session)
    assert run.state == "failed" and error["details"]["run"]["id"] == run.pk
    assert run.flush_details["stored"] == [] and error["details"]["flush"] == run.flush_details
    if fault == "overflow":
        # The flush fell back to the extractor and kept the durable lines; the message says so.
        assert run.flush_outcome == "flushed(offline)"
        [note] = MemoryDocument.objects.filter(assistant=session.assistant, path__startswith="memory/")
        assert f"appended to {note.path}" in error["message"]
    else:
        assert run.flush_outcome.startswith("flush_failed(")
        assert "Nothing was written; the history is unchanged." in error["message"]
        assert not MemoryDocument.objects.filter(assistant=session.assistant).exists()


def test_a_compaction_retried_after_a_fault_succeeds(api, world, faulty, llm):
    session = long_session(world)
    faulty("500")
    assert_error(
        api.post(f"{API}/sessions/{session.pk}/compact/", {}, format="json"), 502, "compaction_failed"
    )
    from tests.chat_requests import router

    llm.default_chat = router()
    response = api.post(f"{API}/sessions/{session.pk}/compact/", {}, format="json")
    assert response.status_code == 201 and response.json()["run"]["state"] == "committed", response.content
    flush_rows = Message.objects.filter(session=session, flush_turn=True).count()
    assert flush_rows == 2  # this flush's prompt and its NO_REPLY: none from the failed attempt


def test_absurd_usage_from_the_model_is_bounded(api, world, llm):
    session = long_session(world, turns=1)
    llm.queue(text_reply("fine", usage={"prompt_tokens": 10**15, "completion_tokens": 10**14}))
    response = say(api, session, "count this")
    assert response.status_code == 201, response.content
    reply = Message.objects.get(session=session, entry_id=response.json()["reply"]["entry_id"])
    assert reply.usage["input"] == 10**9 and reply.usage["output"] == 10**9
