"""The compaction view of recently used sessions, kept per process and extended from the last seq.

Building a session's view (`sessions_app.context.view.session_entries`) reads every message from the
latest compaction's first kept one and turns each row into an AgentMessage; with a large window
that is thousands of rows per turn and per `/context/`. A stored message never changes after its
transaction commits (docs/design.md §D11), so a view stays true as long as its floor and its
latest compaction are the same: the next build reads only the rows from the view's last seq on.

The database stays the truth, and each process checks it before using what it holds: the view is
used only when the latest compaction is the one it was built on, and when its last message is
still there with the same entry id (a row read inside a transaction that rolled back is not).
Anything else builds the view from scratch. Views are evicted least recently used once the
process holds more than `SESSION_VIEW_CACHE_MESSAGES` messages; 0 turns the cache off.

What each call derives from a view's messages is kept beside it (`ViewMemo`): their token
estimates, their OpenAI chat form and the JSON text of both. A view extended by new messages keeps
its memo, so a context build or a turn converts and encodes only the messages stored since; the
memo holds only the view's own message objects, which nothing changes in place (pruning copies),
so what it remembers of one stays true.
"""

from __future__ import annotations

import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Required, TypedDict

from django.conf import settings

from memory_app.tokens import EstimateMemo
from providers.message_types import AgentMessage, ChatMessage

Converter = Callable[[AgentMessage], list[ChatMessage]]


class ViewEntry(TypedDict, total=False):
    """An entry of a view: a message, or the latest compaction (the cut-point entry shape,
    `sessions_app.compaction.cutpoint`)."""

    type: Required[str]  # "message" or "compaction"
    id: Required[str]
    seq: Required[int]
    message: AgentMessage
    summary: str
    firstKeptEntryId: str | None
    tokensBefore: int
    timestamp: int  # epoch ms


class ViewMemo:
    """What the calls on one cached view derived from its messages, kept for the next call.

    Only registered objects are remembered (the view's messages and the OpenAI messages made
    from them); anything else, such as a pruned copy, is derived anew each time and not kept, so
    the memo never outgrows its view. Keys are object ids with the object kept beside them, so an
    id is never reused while the memo lives.
    """

    def __init__(self) -> None:
        self.estimates = EstimateMemo()
        self._registered: dict[int, Mapping[str, Any]] = {}
        self._converted: dict[int, tuple[Any, Any]] = {}  # id -> (message, its OpenAI messages)
        self._encoded: dict[int, tuple[Any, Any]] = {}  # id -> (object, its JSON text)
        self._slots: dict[str, tuple[list[Any], list[Any]]] = {}  # see `extended`
        self._lock = threading.Lock()  # two requests of one process may share a view

    def register(self, message: Mapping[str, Any], tokens: int | None) -> None:
        """Remember ``message`` as one of the view's own, with its stored estimate if known."""
        with self._lock:
            self._registered[id(message)] = message
            if tokens is not None:
                self.estimates.remember(message, tokens)

    def _owns(self, message: Mapping[str, Any]) -> bool:
        return self._registered.get(id(message)) is message

    def converted(self, message: AgentMessage, convert: Converter) -> list[ChatMessage]:
        """Return ``convert(message)``, converted once for the view's own messages."""

        def convert_and_own(value: AgentMessage) -> list[ChatMessage]:
            parts = convert(value)
            if self._owns(value):
                with self._lock:  # the parts are the view's own too: their JSON is kept
                    self._registered.update((id(part), part) for part in parts)
            return parts

        parts: list[ChatMessage] = self._kept(self._converted, message, convert_and_own)
        return parts

    def json(self, value: Mapping[str, Any]) -> str:
        """Return ``value`` as compact JSON text, encoded once for the view's own objects."""
        text: str = self._kept(self._encoded, value, encode_json)
        return text

    def _kept(self, store: dict[int, tuple[Any, Any]], obj: Any, make: Callable[[Any], Any]) -> Any:
        """Return ``make(obj)``, kept in ``store`` for the view's own objects."""
        hit = store.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = make(obj)
        if self._owns(obj):
            with self._lock:
                store[id(obj)] = (obj, value)
        return value

    def json_array(self, values: Sequence[Mapping[str, Any]], *, slot: str = "") -> str:
        """Return a JSON array of ``values``, each encoded as `json` does (see `extended` for ``slot``)."""
        return "[" + ",".join(self.extended(slot, values, lambda new: [self.json(v) for v in new])) + "]"

    def extended(
        self, slot: str, values: Sequence[Any], derive: Callable[[Sequence[Any]], list[Any]]
    ) -> list[Any]:
        """Return ``derive(values)``, deriving only what follows the values of the slot's last call.

        ``derive`` must work item by item (``derive(a + b) == derive(a) + derive(b)``); the last
        call's values are reused while they are the same objects at the head of ``values``, as
        they are when a view only grew (an empty ``slot`` keeps nothing).
        """
        last = self._slots.get(slot) if slot else None
        if last is not None and len(values) >= len(last[0]) and all(map(operator.is_, values, last[0])):
            derived = [*last[1], *derive(values[len(last[0]) :])]
        else:
            derived = derive(values)
        if slot:
            self._slots[slot] = (list(values), derived)
        return derived


def encode_json(value: Any) -> str:
    """Encode as the API's JSON renderer does: compact, non-ASCII kept as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class CachedView:
    """A session's view as built: its entries and what it was built on."""

    compaction: tuple[int, int] | None  # (seq, floor) of the latest compaction, None without one
    entries: tuple[ViewEntry, ...]
    last_seq: int  # the newest message seq in ``entries`` (0 when there is none)
    last_entry_id: str
    memo: ViewMemo = field(default_factory=ViewMemo, compare=False, repr=False)
    # The model-visible messages of ``entries`` (`cutpoint.build_session_context`), extended with them.
    context: tuple[AgentMessage, ...] = field(default=(), compare=False, repr=False)
    # Where in ``entries`` the latest compaction is (-1: none); an extension adds messages only.
    compaction_index: int = field(default=-1, compare=False, repr=False)

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
