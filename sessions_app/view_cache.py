"""The compaction view of recently used sessions, kept per process and extended from the last seq.

Building a session's view (`sessions_app.context.session_entries`) reads every message from the
latest compaction's first kept one and turns each row into an AgentMessage; with a large window
that is thousands of rows per turn and per `/context/`. A stored message never changes after its
transaction commits (docs/design.md §D11), so a view stays true as long as its floor and its
latest compaction are the same: the next build reads only the rows from the view's last seq on.

The database stays the truth, and each process checks it before using what it holds: the view is
used only when the latest compaction is the one it was built on, and when its last message is
still there with the same entry id (a row read inside a transaction that rolled back is not).
Anything else builds the view from scratch. Views are evicted least recently used once the
process holds more than `SESSION_VIEW_CACHE_MESSAGES` messages; 0 turns the cache off.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.conf import settings


@dataclass(frozen=True)
class CachedView:
    """A session's view as built: its entries and what it was built on."""

    compaction: tuple[int, int] | None  # (seq, floor) of the latest compaction, None without one
    entries: tuple[dict[str, Any], ...]
    # Each message entry's stored token estimate (None for a compaction entry), beside `entries`.
    estimates: tuple[int | None, ...]
    last_seq: int  # the newest message seq in ``entries`` (0 when there is none)
    last_entry_id: str

    @property
    def messages(self) -> int:
        return len(self.entries)


_views: OrderedDict[int, CachedView] = OrderedDict()
_held_messages = 0
_lock = threading.Lock()


def get(session_id: int, compaction: tuple[int, int] | None) -> CachedView | None:
    """Return the session's view if it was built on ``compaction``; a view built on another goes."""
    with _lock:
        view = _views.get(session_id)
        if view is None:
            return None
        if view.compaction != compaction or view.last_seq == 0:
            _drop(session_id)
            return None
        _views.move_to_end(session_id)
        return view


def put(session_id: int, view: CachedView) -> None:
    """Keep ``view`` for the session, evicting the least recently used views past the limit."""
    global _held_messages
    limit = settings.SESSION_VIEW_CACHE_MESSAGES
    with _lock:
        _drop(session_id)
        if limit <= 0 or view.messages > limit:
            return
        _views[session_id] = view
        _held_messages += view.messages
        while _held_messages > limit:
            _drop(next(iter(_views)))


def forget(session_id: int) -> None:
    with _lock:
        _drop(session_id)


def clear() -> None:
    global _held_messages
    with _lock:
        _views.clear()
        _held_messages = 0


def _drop(session_id: int) -> None:
    global _held_messages
    view = _views.pop(session_id, None)
    if view is not None:
        _held_messages -= view.messages
