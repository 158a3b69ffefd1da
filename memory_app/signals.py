"""Signals that let upper layers react to memory changes without memory_app knowing them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent after the transaction that changed a memory document commits.
# Arguments: team_id, assistant_id, path, document_id (None when deleted).
memory_document_changed = Signal()
