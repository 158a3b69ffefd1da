"""What the memory pages show of sessions, without importing them (docs/architecture.md, Layers).

sessions_app sits above memory_app. A revision or a search result can point at a session or one of
its messages by primary key; the memory pages name and link those through the `SessionLinks`
sessions_app registers at start-up (`sessions_app.web.memory_links`), as transcripts reach the
index through `memory_app.index.entries.register_source`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from openclaw_site.models import Assistant


class SessionLinks(Protocol):
    """Names and addresses of an assistant's sessions and messages, by primary key."""

    def titles(self, assistant: Assistant, session_pks: Iterable[int]) -> dict[int, str]:
        """Return each session's title (or key), for the sessions of ``assistant`` among the pks."""
        ...

    def message_urls(self, assistant: Assistant, message_pks: Iterable[int]) -> dict[int, str]:
        """Return each message's dashboard address, for the messages of ``assistant`` among the pks."""
        ...


class _NoSessions:
    """Before sessions_app registers (or without it): nothing to name or link."""

    def titles(self, assistant: Assistant, session_pks: Iterable[int]) -> dict[int, str]:
        return {}

    def message_urls(self, assistant: Assistant, message_pks: Iterable[int]) -> dict[int, str]:
        return {}


_links: SessionLinks = _NoSessions()


def register_session_links(links: SessionLinks) -> None:
    """Let the memory pages name and link sessions (called once, from sessions_app's ready())."""
    global _links
    _links = links


def session_links() -> SessionLinks:
    return _links
