"""Every streaming path against the ASGI server: a client that disconnects mid-reply, a silent reply.

/v1 (the official `openai` SDK), REST `"respond": true, "stream": true` and the dashboard's chat
stream. A client that leaves mid-reply leaves the transcript the user message and what the model
had generated, stored as an assistant message with stopReason "aborted" (docs/design.md,
Streaming), and the turn's lock released; the model sends a chunk a second, so the client leaves
after the first and the turn notices at the second (or, on a busy machine, already before it). A NO_REPLY answer sends no text at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx2
import openai
import pytest

from sessions_app.models import Message, Session
from tests import factories
from tests.fake_openai import chunked_reply, text_reply
from tests.streaming_support import raw_sse_events, wait_for
from tests.views_support import HX, signed_in

CHUNKS = ("Once ", "upon ", "a ", "time ", "there ", "was")
CHUNK_DELAY_SECONDS = 1.0


def leave_v1(server: Any, secret: str, world: Any, session: Session) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=secret, max_retries=0)
    stream = client.chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "tell a story"}], stream=True, user=session.key
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    stream.close()


def leave_rest(server: Any, secret: str, world: Any, session: Session) -> None:
    with httpx2.stream(
        "POST",
        f"{server.url}/api/v1/sessions/{session.pk}/messages/",
        json={"role": "user", "content": "tell a story", "respond": True, "stream": True},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    ) as response:
        read_until_first_delta(response)


def leave_dashboard(server: Any, secret: str, world: Any, session: Session) -> None:
    browser = signed_in(world.bob)
    posted = browser.post(f"/sessions/{session.pk}/chat/", {"text": "tell a story"}, **HX).content.decode()
    stream_path = re.search(r'sse-connect="([^"]+)"', posted).group(1)  # type: ignore[union-attr]
    cookies = {name: morsel.value for name, morsel in browser.cookies.items()}
    with httpx2.stream("GET", f"{server.url}{stream_path}", cookies=cookies, timeout=30) as response:
        read_until_first_delta(response)


def read_until_first_delta(response: httpx2.Response) -> None:
    for name, _ in raw_sse_events(response.iter_lines()):
        if name == "delta":
            return
    raise AssertionError("the stream ended before any delta")


@pytest.mark.parametrize("leave", [leave_v1, leave_rest, leave_dashboard], ids=["v1", "rest", "dashboard"])
def test_a_client_that_leaves_mid_reply_leaves_what_was_generated_stored_as_aborted(
    asgi_live_server: Any,
    acme_secret: str,
    llm: Any,
    world: Any,
    leave: Callable[[Any, str, Any, Session], None],
) -> None:
    session = factories.make_session(world.assistant, key="cut")
    llm.queue(chunked_reply(*CHUNKS, chunk_delay_seconds=CHUNK_DELAY_SECONDS))

    leave(asgi_live_server, acme_secret, world, session)

    cut = wait_for(lambda: Message.objects.filter(session=session, role="assistant").first())
    stored = [(m.role, m.stop_reason, m.silent) for m in session.messages.order_by("seq")]
    assert stored == [("user", "", False), ("assistant", "aborted", False)]
    assert session.messages.order_by("seq").first().content == "tell a story"
    # What the model had generated when the turn saw the client gone: the chunk the client was
    # shown and, when the next one arrived first, that one too; never the whole reply.
    prefixes = [[{"type": "text", "text": "".join(CHUNKS[:n])}] for n in range(1, len(CHUNKS))]
    assert cut.content in prefixes, cut.content
    assert cut.usage is None
    llm.queue(text_reply("The end."))
    client = openai.OpenAI(base_url=f"{asgi_live_server.url}/v1", api_key=acme_secret, max_retries=0)
    again = client.chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "and then?"}], user="cut"
    )
    assert again.choices[0].message.content == "The end."  # the turn's lock was released


def shown_by_v1(server: Any, secret: str, world: Any, session: Session) -> str:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=secret, max_retries=0)
    stream = client.chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "fine"}], stream=True, user=session.key
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def shown_by_rest(server: Any, secret: str, world: Any, session: Session) -> str:
    with httpx2.stream(
        "POST",
        f"{server.url}/api/v1/sessions/{session.pk}/messages/",
        json={"role": "user", "content": "fine", "respond": True, "stream": True},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    ) as response:
        return deltas(response)


def shown_by_dashboard(server: Any, secret: str, world: Any, session: Session) -> str:
    browser = signed_in(world.bob)
    posted = browser.post(f"/sessions/{session.pk}/chat/", {"text": "fine"}, **HX).content.decode()
    stream_path = re.search(r'sse-connect="([^"]+)"', posted).group(1)  # type: ignore[union-attr]
    cookies = {name: morsel.value for name, morsel in browser.cookies.items()}
    with httpx2.stream("GET", f"{server.url}{stream_path}", cookies=cookies, timeout=30) as response:
        return deltas(response)


def deltas(response: httpx2.Response) -> str:
    events = list(raw_sse_events(response.iter_lines()))
    assert events[-1][0] == "done"
    return "".join(data for name, data in events if name == "delta")


@pytest.mark.parametrize(
    "shown", [shown_by_v1, shown_by_rest, shown_by_dashboard], ids=["v1", "rest", "dashboard"]
)
@pytest.mark.parametrize("chunks", [("NO_", "RE", "PLY"), (" NO", "_REP", "LY ")])
def test_a_silent_reply_sends_no_text_in_any_streaming_path(
    asgi_live_server: Any,
    acme_secret: str,
    llm: Any,
    world: Any,
    shown: Callable[[Any, str, Any, Session], str],
    chunks: tuple[str, ...],
) -> None:
    session = factories.make_session(world.assistant, key="quiet")
    llm.queue(chunked_reply(*chunks))

    assert shown(asgi_live_server, acme_secret, world, session) == ""
    assert session.messages.get(role="assistant").silent
