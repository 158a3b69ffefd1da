"""Cut point, split turns and session context (docs/openclaw-behaviour.md §1.1, §1.5)."""

from __future__ import annotations

from typing import Any

from sessions_app.compaction.cutpoint import (
    CompactionPlan,
    build_session_context,
    prepare_compaction,
    summary_message_text,
)
from tests import messages
from tests.messages import entry

TOKENS_100 = "x" * 400  # 400 ASCII chars = 100 estimated tokens


def user(entry_id: str, text: str = TOKENS_100) -> dict[str, Any]:
    return entry(entry_id, messages.user(text, timestamp=1))


def assistant(
    entry_id: str, text: str = TOKENS_100, *, calls: tuple[str, ...] = (), usage: dict | None = None
) -> dict[str, Any]:
    blocks = [messages.tool_call(call) for call in calls]
    return entry(entry_id, messages.assistant(text, calls=blocks, usage=usage, timestamp=2))


def result(entry_id: str, call_id: str, text: str = TOKENS_100) -> dict[str, Any]:
    return entry(entry_id, messages.tool_result(call_id, text, timestamp=3))


def compaction(entry_id: str, summary: str, first_kept: str) -> dict[str, Any]:
    return {
        "type": "compaction",
        "id": entry_id,
        "summary": summary,
        "firstKeptEntryId": first_kept,
        "tokensBefore": 0,
    }


def ids(messages: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[str]:
    return [m["entryId"] for m in messages]


def test_cut_keeps_recent_tokens_and_summarizes_the_rest() -> None:
    entries = [user("u1"), assistant("a1"), user("u2"), assistant("a2")]

    plan = prepare_compaction(entries, keep_recent_tokens=150)

    assert plan == CompactionPlan(
        first_kept_entry_id="u2",
        first_kept_index=2,
        messages_to_summarize=(
            {**entries[0]["message"], "entryId": "u1"},
            {**entries[1]["message"], "entryId": "a1"},
        ),
        turn_prefix_messages=(),
        is_split_turn=False,
        tokens_before=400,
        previous_summary=None,
        summarized_entry_ids=("u1", "a1"),
        prefix_entry_ids=(),
    )
    assert "entryId" not in entries[0]["message"]  # input untouched


def test_cut_never_lands_on_a_tool_result() -> None:
    # The budget is reached at r1, an invalid cut point, so the cut moves forward to a2.
    entries = [
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1", "", calls=("c1",)),
        result("r1", "c1", "y" * 8000),
        assistant("a2", "done"),
    ]

    plan = prepare_compaction(entries, keep_recent_tokens=100)

    assert plan is not None
    assert plan.first_kept_entry_id == "a2"
    assert plan.is_split_turn is True
    assert plan.summarized_entry_ids == ("u0", "a0")
    assert plan.prefix_entry_ids == ("u1", "a1", "r1")


def test_a_tool_result_always_stays_on_the_side_of_its_call() -> None:
    entries = [
        user("u1"),
        assistant("a1", "", calls=("c1", "c2")),
        result("r1", "c1"),
        result("r2", "c2"),
        assistant("a2", calls=("c3",)),
        result("r3", "c3"),
        user("u2"),
        assistant("a3"),
    ]
    call_owner = {"r1": "a1", "r2": "a1", "r3": "a2"}

    for keep in range(1, 900, 13):
        plan = prepare_compaction(entries, keep_recent_tokens=keep)
        assert plan is not None
        kept = {e["id"] for e in entries[plan.first_kept_index :]}
        assert entries[plan.first_kept_index]["message"]["role"] != "toolResult"
        for result_id, owner in call_owner.items():
            assert (result_id in kept) == (owner in kept), (keep, result_id)


def test_split_turn_puts_the_turn_start_into_the_prefix() -> None:
    entries = [
        user("u0"),
        assistant("a0"),
        user("u1", "fix it"),
        assistant("a1", calls=("c1",)),
        result("r1", "c1"),
        assistant("a2", calls=("c2",)),
        result("r2", "c2"),
        assistant("a3"),
    ]

    plan = prepare_compaction(entries, keep_recent_tokens=150)

    assert plan is not None
    assert plan.first_kept_entry_id == "a3"
    assert plan.is_split_turn is True
    assert plan.summarized_entry_ids == ("u0", "a0")
    assert plan.prefix_entry_ids == ("u1", "a1", "r1", "a2", "r2")
    assert ids(plan.turn_prefix_messages) == ["u1", "a1", "r1", "a2", "r2"]


def test_nothing_to_compact_when_everything_fits() -> None:
    entries = [user("u1", "hi"), assistant("a1", "hello")]

    plan = prepare_compaction(entries, keep_recent_tokens=20000)

    assert plan is not None
    assert plan.first_kept_entry_id == "u1"
    assert plan.messages_to_summarize == ()
    assert plan.nothing_to_compact is True


def test_no_plan_right_after_a_compaction_or_for_an_empty_session() -> None:
    entries = [user("u1"), assistant("a1"), compaction("c1", "S", "a1")]

    assert prepare_compaction(entries, keep_recent_tokens=10) is None
    assert prepare_compaction([], keep_recent_tokens=10) is None


def test_next_compaction_summarizes_the_kept_tail_and_feeds_the_previous_summary() -> None:
    entries = [
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant("a2"),
        compaction("c1", "S" * 40, "u2"),
        user("u3"),
        assistant("a3"),
        user("u4"),
        assistant("a4"),
    ]

    plan = prepare_compaction(entries, keep_recent_tokens=150)

    assert plan is not None
    assert plan.previous_summary == "S" * 40
    # u2/a2 were still in context after c1: they are summarised now, not silently dropped.
    assert plan.summarized_entry_ids == ("u2", "a2", "u3", "a3")
    assert plan.first_kept_entry_id == "u4"
    # Context = summary (10 tokens) + u2, a2, u3, a3, u4, a4 (100 each).
    assert plan.tokens_before == 610


def test_tokens_before_prefers_usage_reported_after_the_last_compaction() -> None:
    stale = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 99999}
    fresh = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 5000}
    base = [user("u1"), assistant("a1", usage=stale), compaction("c1", "S" * 40, "u1")]

    only_stale = prepare_compaction([*base, user("u2")], keep_recent_tokens=10)
    with_fresh = prepare_compaction([*base, assistant("a2", usage=fresh), user("u3")], keep_recent_tokens=10)

    assert only_stale is not None and only_stale.tokens_before == 10 + 100 + 100 + 100
    assert with_fresh is not None and with_fresh.tokens_before == 5000 + 100


def test_build_session_context_after_two_compactions() -> None:
    entries = [
        user("m1"),
        assistant("m2"),
        user("m3"),
        assistant("m4"),
        compaction("c1", "first", "m3"),
        user("m5"),
        assistant("m6"),
        compaction("c2", "second", "m5"),
        user("m7"),
    ]

    context = build_session_context(entries)

    assert context[0] == {"role": "compactionSummary", "summary": "second", "timestamp": 0, "entryId": "c2"}
    assert ids(context[1:]) == ["m5", "m6", "m7"]


def test_build_session_context_keeps_entries_from_before_the_previous_compaction() -> None:
    entries = [
        user("m1"),
        assistant("m2"),
        user("m3"),
        assistant("m4"),
        compaction("c1", "first", "m3"),
        user("m5"),
        compaction("c2", "second", "m4"),
        user("m6"),
    ]

    context = build_session_context(entries)

    assert context[0]["summary"] == "second"
    assert ids(context[1:]) == ["m4", "m5", "m6"]


def test_build_session_context_without_compaction_is_every_message() -> None:
    entries = [user("m1"), assistant("m2")]

    assert ids(build_session_context(entries)) == ["m1", "m2"]


def test_summary_message_text_wraps_the_summary() -> None:
    assert summary_message_text("S") == (
        "The conversation history before this point was compacted into the following summary:"
        "\n\n<summary>\nS\n</summary>"
    )
