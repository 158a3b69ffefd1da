"""Helpers shared by the dashboard view tests: a signed-in client, signing in through the form, and
how to tell an htmx partial."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client

HX = {"HTTP_HX_REQUEST": "true"}  # the header htmx sends with its requests


def signed_in(user: Any) -> Client:
    """Return a test client with ``user`` signed in."""
    client = Client()
    client.force_login(user)
    return client


def signs_in(client: Client, username: str, password: str) -> bool:
    """Sign ``client`` in through the form (django-axes counts sign-ins per request); tell whether
    it was accepted."""
    response = client.post("/accounts/login/", {"username": username, "password": password})
    return response.status_code == 302


def is_full_page(response: Any) -> bool:
    """Tell a full page from an htmx partial."""
    return b"<html" in response.content


def streamed_chat(client: Client, session_id: int, text: str) -> tuple[str, list[str], str]:
    """Post a chat message as htmx does, then read its event stream as the SSE extension does.

    Returns the post's HTML (transcript and live turn), the reply's `delta`s, and the `done` HTML.
    """
    from tests.streaming_support import django_stream_lines, raw_sse_events

    posted = client.post(f"/sessions/{session_id}/chat/", {"text": text}, **HX).content.decode()
    match = re.search(r'sse-connect="([^"]+)"', posted)
    assert match, "the post answered no live turn"
    events = list(raw_sse_events(django_stream_lines(client.get(match.group(1)))))
    deltas = [data for name, data in events if name == "delta"]
    assert events[-1][0] == "done"
    return posted, deltas, events[-1][1]
