"""Offline summariser and flush extractor (no model configured)."""

from __future__ import annotations

from sessions_app.compaction.summary import MAX_COMPACTION_SUMMARY_CHARS, offline_flush_lines, offline_summary
from sessions_app.compaction.summary.offline import OFFLINE_MARKER
from tests.messages import assistant, tool_call, user

CONVERSATION = [
    user("We decided to use Postgres 16. You must never push to main. TODO: write the migration guide."),
    assistant(
        "Agreed. The repo is at /srv/repo/app and build 9f8e7d6c5b4a passed.",
        calls=[tool_call("c1", "read", {"path": "/etc/app/conf.yaml"})],
    ),
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [{"type": "text", "text": "port db.local:5432"}],
        "isError": False,
        "timestamp": 3,
    },
    user("我们决定用 Redis。不要删除数据。Can you check the logs?"),
]


def test_offline_summary_fills_the_five_headings() -> None:
    summary = offline_summary(messages=CONVERSATION, previous_summary=None)

    assert summary == "\n".join(
        [
            OFFLINE_MARKER,
            "",
            "## Decisions",
            "- We decided to use Postgres 16.",
            "- Agreed.",
            "- 我们决定用 Redis。",
            "",
            "## Open TODOs",
            "- TODO: write the migration guide.",
            "",
            "## Constraints/Rules",
            "- You must never push to main.",
            "- 不要删除数据。",
            "",
            "## Pending user asks",
            "- 我们决定用 Redis。不要删除数据。Can you check the logs?",
            "",
            "## Exact identifiers",
            "- /srv/repo/app",
            "- 9f8e7d6c5b4a",
            "- /etc/app/conf.yaml",
            "- db.local:5432",
        ]
    )


def test_offline_summary_merges_the_previous_summary() -> None:
    previous = offline_summary(messages=CONVERSATION, previous_summary=None)

    summary = offline_summary(
        messages=[user("we should add tests for 1234567"), assistant("ok")],
        previous_summary=previous,
        instructions="focus on db",
    )

    assert summary == "\n".join(
        [
            OFFLINE_MARKER,
            "_(focus requested: focus on db)_",
            "",
            "## Decisions",
            "- We decided to use Postgres 16.",
            "- Agreed.",
            "- 我们决定用 Redis。",
            "",
            "## Open TODOs",
            "- TODO: write the migration guide.",
            "- we should add tests for 1234567",
            "",
            "## Constraints/Rules",
            "- You must never push to main.",
            "- 不要删除数据。",
            "",
            "## Pending user asks",
            "None.",  # the assistant answered since
            "",
            "## Exact identifiers",
            "- /srv/repo/app",
            "- 9f8e7d6c5b4a",
            "- /etc/app/conf.yaml",
            "- db.local:5432",
            "- 1234567",
        ]
    )


def test_offline_summary_of_small_talk_says_none() -> None:
    summary = offline_summary(messages=[user("hello"), assistant("hi there")], previous_summary=None)

    assert summary == (
        f"{OFFLINE_MARKER}\n\n## Decisions\nNone.\n\n## Open TODOs\nNone.\n\n## Constraints/Rules\n"
        "None.\n\n## Pending user asks\nNone.\n\n## Exact identifiers\nNone captured."
    )


def test_offline_summary_keeps_lines_short_and_the_cap() -> None:
    padding = "very " * 60
    texts = [
        f"We decided {i} {padding}. You must {i} {padding}. We need to {i} {padding}." for i in range(20)
    ]
    ids = " ".join(f"{i:08x}" for i in range(1, 501))

    summary = offline_summary(messages=[*map(user, texts), assistant(ids)], previous_summary=None)

    assert f"- {texts[0][:197]}..." in summary
    assert len(summary) == MAX_COMPACTION_SUMMARY_CHARS
    # The body is cut, the identifiers section survives whole.
    assert "[Compaction summary truncated to fit budget]\n\n## Exact identifiers\n- 00000001\n" in summary
    assert summary.endswith("- 000001f4")


def test_offline_flush_lines_skip_what_memory_already_holds() -> None:
    existing = "- Decision: We decided to use Postgres 16.\nrepo: /srv/repo/app"

    lines = offline_flush_lines(messages=CONVERSATION, existing_text=existing)

    assert lines == [
        "- Rule: You must never push to main.",
        "- TODO: write the migration guide.",
        "- Decision: Agreed.",
        "- Decision: 我们决定用 Redis。",
        "- Rule: 不要删除数据。",
        "- Identifier: 9f8e7d6c5b4a",
    ]


def test_offline_flush_lines_label_preferences() -> None:
    lines = offline_flush_lines(
        messages=[user("I prefer tabs over spaces."), user("I like short answers.")], existing_text=""
    )

    assert lines == ["- Preference: I prefer tabs over spaces.", "- Preference: I like short answers."]
