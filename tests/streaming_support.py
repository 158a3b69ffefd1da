"""Helpers for tests of streamed replies: reading server-sent events, waiting for what a server thread stores."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
WAIT_SECONDS = 20.0


def wait_for(probe: Callable[[], T | None], *, seconds: float = WAIT_SECONDS) -> T:
    """Return the first truthy answer of `probe`, polling; fail after `seconds` (not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing arrived within {seconds:g} s")
        time.sleep(0.05)


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """Read server-sent events from lines of text: (event name, JSON data) pairs."""
    for event, data in raw_sse_events(lines):
        yield event, json.loads(data)


def raw_sse_events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Read server-sent events from lines of text: (event name, data) pairs, as EventSource does."""
    event, data = "message", []
    for line in lines:
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
        elif not line.strip() and data:
            yield event, "\n".join(data)
            event, data = "message", []


def django_stream_lines(response: Any) -> Iterator[str]:
    """Return the lines of a Django streaming response (the WSGI path, through the test client)."""
    for chunk in response.streaming_content:
        yield from chunk.decode("utf-8").split("\n")
