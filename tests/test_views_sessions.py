"""Dashboard session pages: list, session page (gauge, transcript, chat, context, compaction), permalinks.

The model is the real `openai` client against the scripted server on 127.0.0.1 (`llm` fixture);
`no_llm` leaves the server without a model, as a fresh install is.
"""

from __future__ import annotations

import re

import pytest

from sessions_app.models import CompactionEntry, CompactionRun, Message, Session
from tests import factories
from tests.chat_requests import SUMMARY_TEXT, router
from tests.fake_openai import text_reply, tool_call_reply
from tests.messages import assistant, chatter, tool_call, tool_result, usage, user
from tests.views_support import HX, is_full_page, signed_in, streamed_chat

pytestmark = pytest.mark.django_db


def small_window(assistant_, **compaction):
    """Window 16000, reserve 4000 (floor off): flush at 10000, compaction above 12000."""
    settings = assistant_.settings
    settings["compaction"].update(
        {"reserveTokens": 4000, "reserveTokensFloor": 0, "keepRecentTokens": 300, **compaction}
    )
    settings["compaction"]["memoryFlush"]["softThresholdTokens"] = 2000
    assistant_.context_window = 16000
    assistant_.settings = settings
    assistant_.save()
    return assistant_


# --- list and create ---------------------------------------------------------------------------


def test_session_list_shows_the_assistants_sessions(world):
    session = factories.make_session(world.assistant, title="Launch plan")
    factories.add_messages(session, user("hi"), assistant("hello"))
    factories.make_session(world.other_assistant, title="Their plan")
    response = signed_in(world.vera).get("/assistants/helper/sessions/")
    assert response.status_code == 200 and is_full_page(response)
    content = response.content.decode()
    assert "Launch plan" in content and "Their plan" not in content
    assert re.search(r'<td class="num" data-label="Messages">2</td>', content)
    assert "Start session" not in content  # viewers read only
    partial = signed_in(world.vera).get("/assistants/helper/sessions/", **HX)
    assert not is_full_page(partial) and b'id="session-list"' in partial.content
    assert signed_in(world.vera).get("/assistants/rival/sessions/").status_code == 404


def test_member_starts_a_session(world):
    client = signed_in(world.bob)
    response = client.post("/assistants/helper/sessions/", {"title": "Planning", "key": ""})
    session = Session.objects.get(assistant=world.assistant)
    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/"
    assert session.title == "Planning" and len(session.key) == 12


def test_session_key_errors_show_next_to_the_field(world):
    factories.make_session(world.assistant, key="taken")
    client = signed_in(world.bob)
    taken = client.post("/assistants/helper/sessions/", {"title": "x", "key": "taken"})
    assert taken.status_code == 422 and re.search(
        rb'id="id_key_error">The assistant already has a session', taken.content
    )
    bad = client.post("/assistants/helper/sessions/", {"title": "x", "key": "no spaces"})
    assert bad.status_code == 422 and b'id="id_key_error">key: letters, digits' in bad.content
    assert Session.objects.filter(assistant=world.assistant).count() == 1


def test_viewer_cannot_start_a_session(world):
    response = signed_in(world.vera).post("/assistants/helper/sessions/", {"title": "x"})
    assert response.status_code == 403 and not Session.objects.exists()


# --- the session page --------------------------------------------------------------------------


def test_session_page_renders_transcript_with_tools_collapsed_and_sizes(world, no_llm):
    session = factories.make_session(world.assistant, title="Tools")
    factories.add_messages(
        session,
        user("What is in the log?"),
        assistant(
            "Let me look.", calls=[tool_call("c1", "exec", {"cmd": "tail -n 500 app.log"})], usage=usage(900)
        ),
        tool_result("c1", "ERROR boom\n" * 300, name="exec"),
        assistant("The log shows ERROR boom repeated.", usage=usage(1800)),
    )
    response = signed_in(world.vera).get(f"/sessions/{session.pk}/")
    assert response.status_code == 200 and is_full_page(response)
    content = response.content.decode()
    assert (
        content.index("What is in the log?")
        < content.index("Let me look.")
        < content.index("ERROR boom repeated")
    )
    assert re.search(r'<details class="tool-call">\s*<summary>.*?Called <code>exec</code>', content, re.S)
    assert re.search(
        r'<details class="tool-result">\s*<summary>.*?Result of <code>exec</code>.*?3.3k chars', content, re.S
    )
    assert "900 in" in content  # provider-reported usage of the assistant message
    assert "members of Acme can chat" in content and 'id="composer"' not in content  # viewer


def test_session_page_shows_the_gauge_with_thresholds(world, no_llm):
    small_window(world.assistant)
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("hello"), assistant("hi", usage=usage(10500, 20)))
    content = signed_in(world.bob).get(f"/sessions/{session.pk}/").content.decode()
    gauge = re.search(r'<section id="gauge".*?</section>', content, re.S).group(0)
    assert 'aria-valuemax="16000"' in gauge
    now = int(re.search(r'aria-valuenow="(\d+)"', gauge).group(1))
    assert 10500 <= now < 12000
    assert "state-flush" in gauge  # past the flush threshold, not yet the compaction one
    assert re.search(r"Memory flush at</dt><dd>10k</dd>", gauge) and re.search(
        r"Compaction above</dt><dd>12k</dd>", gauge
    )
    assert "left: 62.50%" in gauge and "left: 75.00%" in gauge
    partial = signed_in(world.bob).get(f"/sessions/{session.pk}/gauge/", **HX)
    assert not is_full_page(partial) and partial.content.strip().startswith(b'<section id="gauge"')


def test_another_teams_session_pages_are_404(world, no_llm):
    theirs = factories.make_session(world.other_assistant)
    [message] = factories.add_messages(theirs, user("secret"))
    client = signed_in(world.bob)
    for url in [
        "",
        "gauge/",
        "transcript/",
        "runs/",
        "context/",
        "compact/",
        f"messages/{message.seq}/",
        "compactions/abcdef12/",
    ]:
        assert client.get(f"/sessions/{theirs.pk}/{url}").status_code == 404, url
    assert client.post(f"/sessions/{theirs.pk}/chat/", {"text": "hi"}).status_code == 404
    assert client.post(f"/sessions/{theirs.pk}/compact/").status_code == 404
    assert Message.objects.filter(session=theirs).count() == 1


def test_htmx_partials_of_the_session_page(world, no_llm):
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("hello"))
    client = signed_in(world.vera)
    for url, marker in [
        ("transcript/", b'<section id="transcript"'),
        ("runs/", b'<div id="runs"'),
        ("context/", b'class="model-view"'),
        ("compact/", b'id="compact-preview"'),
    ]:
        partial = client.get(f"/sessions/{session.pk}/{url}", **HX)
        assert partial.status_code == 200 and not is_full_page(partial) and marker in partial.content, url
        full = client.get(f"/sessions/{session.pk}/{url}")
        assert full.status_code == 200 and is_full_page(full) and marker in full.content, url


def test_message_permalink_highlights_the_message(world, no_llm):
    session = factories.make_session(world.assistant)
    rows = factories.add_messages(session, *chatter(4, words=3))
    response = signed_in(world.vera).get(f"/sessions/{session.pk}/messages/{rows[4].seq}/")
    assert response.status_code == 200
    content = response.content.decode()
    assert f'id="m-{rows[4].seq}"' in content and "msg-target" in content
    assert signed_in(world.vera).get(f"/sessions/{session.pk}/messages/999/").status_code == 404


# --- chat --------------------------------------------------------------------------------------


def test_chat_without_a_model_says_how_to_configure_one_and_stores_nothing(world, no_llm):
    session = factories.make_session(world.assistant)
    client = signed_in(world.bob)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    settings_link = 'href="/assistants/helper/settings/#id_model"'
    assert "No model is connected yet, so Helper can&#x27;t reply" in page and settings_link in page
    response = client.post(f"/sessions/{session.pk}/chat/", {"text": "hello?"}, **HX)
    assert response.status_code == 503
    assert response["HX-Retarget"] == "#composer-notice"
    notice = response.content.decode()
    assert "Your message was not saved. No model is connected yet" in notice and "notice-error" in notice
    assert settings_link in notice
    # The dashboard's words, not the API's: no request fields, no Markdown backticks.
    assert "respond" not in notice and "`" not in notice
    full = client.post(f"/sessions/{session.pk}/chat/", {"text": "hello?"})
    assert (
        full.status_code == 503
        and is_full_page(full)
        and "Your message was not saved" in full.content.decode()
    )
    assert not Message.objects.filter(session=session).exists()


def test_chat_posts_and_swaps_in_the_reply_and_the_gauge(world, llm):
    llm.queue(
        text_reply(
            "Hi Bob, the launch is on 2026-12-15.", usage={"prompt_tokens": 1234, "completion_tokens": 12}
        )
    )
    session = factories.make_session(world.assistant)
    posted, deltas, content = streamed_chat(signed_in(world.bob), session.pk, "When is the launch?")
    assert posted.lstrip().startswith('<section id="transcript"') and 'id="live-turn"' in posted
    assert "".join(deltas) == "Hi Bob, the launch is on 2026-12-15."
    assert content.lstrip().startswith('<section id="transcript"')
    assert content.index("When is the launch?") < content.index("the launch is on 2026-12-15")
    assert '<div id="live-turn" hx-swap-oob="delete">' in content
    assert re.search(r'<section id="gauge"[^>]*hx-swap-oob="true"', content)
    assert re.search(r'<div id="runs"[^>]*hx-swap-oob="true"', content)
    roles = list(Message.objects.filter(session=session).values_list("role", flat=True))
    assert roles == ["user", "assistant"]
    assert llm.chat_requests[-1]["messages"][-1]["content"] == "When is the launch?"


def test_chat_with_a_tool_call_shows_it_collapsed(world, llm):
    factories.make_document(world.assistant, "MEMORY.md", "launch: 2026-12-15\n")
    llm.queue(tool_call_reply([("memory_get", {"path": "MEMORY.md"})]), text_reply("It is on 2026-12-15."))
    session = factories.make_session(world.assistant)
    _, _, content = streamed_chat(signed_in(world.bob), session.pk, "launch?")
    assert "Called <code>memory_get</code>" in content and "Result of <code>memory_get</code>" in content
    assert "It is on 2026-12-15." in content


def test_failed_turn_keeps_the_message_and_shows_the_error(world, llm):
    from tests.fake_openai import error_reply

    llm.queue(error_reply(500, "upstream exploded"))
    session = factories.make_session(world.assistant)
    _, _, content = streamed_chat(signed_in(world.bob), session.pk, "are you there?")
    assert "are you there?" in content and "Your message is stored" in content and "notice-error" in content


def test_viewer_cannot_chat(world, llm):
    session = factories.make_session(world.assistant)
    assert signed_in(world.vera).post(f"/sessions/{session.pk}/chat/", {"text": "hi"}).status_code == 403
    assert not Message.objects.filter(session=session).exists()


def test_empty_chat_message_is_refused(world, llm):
    session = factories.make_session(world.assistant)
    response = signed_in(world.bob).post(f"/sessions/{session.pk}/chat/", {"text": "   "}, **HX)
    assert response.status_code == 422 and b"Type a message first." in response.content


def test_chat_without_htmx_redirects_back_to_the_session(world, llm):
    llm.queue(text_reply("ok"))
    session = factories.make_session(world.assistant)
    response = signed_in(world.bob).post(f"/sessions/{session.pk}/chat/", {"text": "hi"})
    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/#composer"


# --- flush, compaction, silent turns -----------------------------------------------------------


def _compacted_session(world, llm):
    """A session whose turns went past the flush and then the compaction threshold."""
    small_window(world.assistant)
    llm.default_chat = router(chat="noted", summary=SUMMARY_TEXT, flush="NO_REPLY")
    session = factories.make_session(world.assistant)
    factories.add_messages(session, *chatter(6, words=40))
    from sessions_app.compaction.compact import compact_session

    compact_session(session_id=session.pk, trigger="manual")
    return session


def test_compaction_entry_shows_summary_trigger_tokens_and_expands_its_originals(world, llm):
    session = _compacted_session(world, llm)
    entry = CompactionEntry.objects.get(session=session)
    client = signed_in(world.vera)
    content = client.get(f"/sessions/{session.pk}/").content.decode()
    card = re.search(r'<article class="compaction-card".*?</article>', content, re.S).group(0)
    assert "Compaction #1" in card and 'badge-trigger">manual<' in card
    assert "## Decisions" in card and "Keep going." in card
    assert re.search(r"\d+(\.\d)?k? → \d+(\.\d)?k? tokens", card)
    count = int(re.search(r"Show the (\d+) original messages", card).group(1))
    assert count >= 2
    # The covered originals are not in the live transcript, only behind the card.
    first = Message.objects.filter(session=session).order_by("seq").first()
    assert f'id="m-{first.seq}"' not in content
    covered = client.get(f"/sessions/{session.pk}/compactions/{entry.entry_id}/", **HX)
    assert covered.status_code == 200 and not is_full_page(covered)
    assert f'id="m-{first.seq}"' in covered.content.decode()
    assert covered.content.decode().count('class="msg msg-') == count
    runs = client.get(f"/sessions/{session.pk}/runs/", **HX).content.decode()
    assert "badge-committed" in runs and re.search(r"Memory flushed|Flush skipped", runs)


def test_flush_turn_is_silent_and_behind_the_toggle(world, llm):
    small_window(world.assistant)
    writes = {"n": 0}

    def flush(request):
        writes["n"] += 1
        if writes["n"] == 1:
            return tool_call_reply(
                [
                    (
                        "write",
                        {
                            "path": "memory/" + request["messages"][-1]["content"].split("memory/")[1][:13],
                            "content": "- Launch date 2026-12-15 decided.",
                        },
                    )
                ]
            )
        return text_reply("NO_REPLY")

    llm.default_chat = router(chat="noted", summary=SUMMARY_TEXT, flush=flush)
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("hi"), assistant("hello", usage=usage(10200, 20)))
    from sessions_app.compaction.flush import run_memory_flush

    outcome = run_memory_flush(session_id=session.pk)
    assert outcome.status == "flushed"
    content = signed_in(world.bob).get(f"/sessions/{session.pk}/").content.decode()
    silent = re.search(
        r'<div class="silent-turn">.*?</div>\s*(?=<article|<div class="silent|</section>)', content, re.S
    ).group(0)
    assert "Memory flush turn" in silent and "msg-silent" in silent
    assert re.search(r'<span id="silent-count" class="count"\s*>\d+</span>', content)
    assert 'id="show-silent"' in content
    assert "Flushed this cycle</dt><dd>yes" in content


def test_compact_preview_writes_nothing_and_confirm_compacts(world, llm):
    small_window(world.assistant)
    llm.default_chat = router(chat="noted", summary=SUMMARY_TEXT, flush="NO_REPLY")
    session = factories.make_session(world.assistant)
    factories.add_messages(session, *chatter(6, words=40))
    client = signed_in(world.bob)
    preview = client.get(f"/sessions/{session.pk}/compact/", **HX)
    assert preview.status_code == 200
    content = preview.content.decode()
    assert "nothing has been written yet" in content and "Messages summarised" in content
    assert "Compact now" in content
    assert not CompactionEntry.objects.filter(session=session).exists() and not CompactionRun.objects.exists()
    done = client.post(f"/sessions/{session.pk}/compact/", {"instructions": "Keep the launch date"}, **HX)
    assert done.status_code == 200
    body = done.content.decode()
    assert "Compacted" in body and re.search(r'<section id="transcript"[^>]*hx-swap-oob="true"', body)
    assert CompactionEntry.objects.filter(session=session).count() == 1
    run = CompactionRun.objects.get(session=session)
    assert run.trigger == "manual" and run.state == "committed" and run.instructions == "Keep the launch date"


def test_compact_with_nothing_to_compact_says_so(world, llm):
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("hi"))
    preview = signed_in(world.bob).get(f"/sessions/{session.pk}/compact/", **HX).content.decode()
    assert "Nothing to compact" in preview and "Compact now" not in preview


def test_slash_compact_in_the_chat_compacts(world, llm):
    small_window(world.assistant)
    llm.default_chat = router(chat="noted", summary=SUMMARY_TEXT, flush="NO_REPLY")
    session = factories.make_session(world.assistant)
    factories.add_messages(session, *chatter(6, words=40))
    response = signed_in(world.bob).post(
        f"/sessions/{session.pk}/chat/", {"text": "/compact focus on dates"}, **HX
    )
    assert response.status_code == 200
    assert "Compacted" in response.content.decode() and "Compaction #1" in response.content.decode()
    assert CompactionRun.objects.get(session=session).instructions == "focus on dates"
    assert not Message.objects.filter(session=session, content="/compact focus on dates").exists()


def test_viewer_may_preview_but_not_compact(world, llm):
    small_window(world.assistant)
    session = factories.make_session(world.assistant)
    factories.add_messages(session, *chatter(6, words=40))
    client = signed_in(world.vera)
    preview = client.get(f"/sessions/{session.pk}/compact/", **HX).content.decode()
    assert "Compact now" not in preview
    assert client.post(f"/sessions/{session.pk}/compact/").status_code == 403
    assert not CompactionRun.objects.exists()


# --- what the model sees -----------------------------------------------------------------------


def test_what_the_model_sees_marks_pruned_tool_results(world, llm):
    settings = world.assistant.settings
    settings["contextPruning"].update(
        {"mode": "always", "keepLastAssistants": 1, "softTrimRatio": 0.0, "hardClearRatio": 1.0}
    )
    world.assistant.settings = settings
    world.assistant.context_window = 16000
    world.assistant.save()
    session = factories.make_session(world.assistant)
    factories.add_messages(
        session,
        user("read the log"),
        assistant(calls=[tool_call("c1", "exec", {"cmd": "cat log"})]),
        tool_result("c1", "x" * 9000),
        assistant("It is long."),
        user("thanks"),
        assistant("welcome"),
    )
    content = signed_in(world.vera).get(f"/sessions/{session.pk}/context/", **HX).content.decode()
    assert "System prompt" in content and "Result of exec" in content
    assert re.search(r'class="ctx-item ctx-toolResult ctx-pruned".*?trimmed', content, re.S)
    assert "tool_result_get" in content
    assert Message.objects.get(session=session, role="toolResult").content[0]["text"] == "x" * 9000


def test_page_polls_while_a_flush_is_due_and_stops_after_it(world, llm):
    small_window(world.assistant)
    llm.default_chat = router(chat="noted", summary=SUMMARY_TEXT, flush="NO_REPLY")
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("hello"), assistant("hi", usage=usage(10500, 20)))
    client = signed_in(world.bob)
    gauge = re.search(
        r'<section id="gauge".*?</section>', client.get(f"/sessions/{session.pk}/").content.decode(), re.S
    ).group(0)
    assert "Memory flush queued…" in gauge
    assert f'hx-get="/sessions/{session.pk}/refresh/" hx-trigger="every 2s" hx-swap="none"' in gauge
    refresh = client.get(f"/sessions/{session.pk}/refresh/", **HX).content.decode()
    for marker in (
        '<section id="transcript"',
        '<section id="gauge"',
        '<div id="runs"',
        '<span id="silent-count"',
    ):
        assert re.search(re.escape(marker) + r'[^>]*hx-swap-oob="true"', refresh), marker
    from sessions_app.compaction.flush import run_memory_flush

    run_memory_flush(session_id=session.pk)  # what the queued task does in a worker
    gauge = re.search(
        r'<section id="gauge".*?</section>', client.get(f"/sessions/{session.pk}/").content.decode(), re.S
    ).group(0)
    assert "queued" not in gauge and "every 2s" not in gauge
    assert client.get(f"/sessions/{session.pk}/refresh/").status_code == 302


def test_read_only_assistant_does_not_wait_for_a_flush(world, llm):
    small_window(world.assistant)
    world.assistant.workspace_access = "ro"
    world.assistant.save()
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("hello"), assistant("hi", usage=usage(10500, 20)))
    content = signed_in(world.bob).get(f"/sessions/{session.pk}/").content.decode()
    assert "queued" not in content and "every 2s" not in content


def test_a_chat_stream_runs_once(world, llm):
    session = factories.make_session(world.assistant)
    client = signed_in(world.bob)
    posted = client.post(f"/sessions/{session.pk}/chat/", {"text": "hello"}, **HX).content.decode()
    url = re.search(r'sse-connect="([^"]+)"', posted).group(1)
    assert b"event: done" in b"".join(client.get(url).streaming_content)
    assert client.get(url).status_code == 204  # an EventSource reconnecting stops there
    assert signed_in(world.charlie).get(url).status_code == 404
    assert Message.objects.filter(session=session, role="user").count() == 1


@pytest.mark.parametrize("htmx", [False, True])
def test_assistant_replies_are_rendered_markdown_with_scripts_inert_and_raw_text_a_click_away(world, htmx):
    session = factories.make_session(world.assistant, "md")
    reply = "Here is **the plan**:\n\n- one\n- two\n\n<script>alert(1)</script> `code`"
    factories.add_messages(session, user("**not markdown** for users"), assistant(reply))
    url = f"/sessions/{session.pk}/" if not htmx else f"/sessions/{session.pk}/transcript/"
    response = signed_in(world.bob).get(url, **(HX if htmx else {}))
    page = response.content.decode()
    assert response.status_code == 200 and is_full_page(response) is not htmx
    assert "<strong>the plan</strong>" in page and "<li>one</li>" in page and "<code>code</code>" in page
    assert "<script>alert(1)</script>" not in page  # the sanitizer drops it; the raw view escapes it
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Raw text" in page
    assert "**not markdown** for users" in page  # a user's text is shown as typed
