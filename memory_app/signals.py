"""Signals that let upper layers react to memory changes without memory_app knowing them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.dispatch import Signal

# Sent after the transaction that changed a memory document commits.
# Arguments: team_id, assistant_id, path, document_id (None when deleted).
memory_document_changed = Signal()

_held: ContextVar[bool] = ContextVar("memory_app_notifications_held", default=False)


@contextmanager
def notifications_held() -> Iterator[None]:
    """Send no `memory_document_changed` for the writes of the block.

    For a bulk writer that queues the follow-up work of all its documents at once (an import
    queues one reindex and one export of the assistant instead of an index and an export job per
    document; docs/design.md, Background work).
    """
    token = _held.set(True)
    try:
        yield
    finally:
        _held.reset(token)


def notifications_are_held() -> bool:
    return _held.get()
