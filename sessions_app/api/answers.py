"""What the context engine's answers are made of: the objects its output serializers render.

Each answer of `sessions_app.api.responses` is one of these (or a model or a domain result),
rendered by its serializer in `sessions_app.api.serializers`, which is also its schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from sessions_app.context.build import ModelContext
from sessions_app.context.figures import SessionFigures, TokenFigures
from sessions_app.models import CompactionEntry, CompactionRun, Session
from sessions_app.transcript import TranscriptEntry


class CompactionRef(TypedDict):
    """Which compaction summary the context starts from."""

    entry_id: str
    first_kept_entry_id: str | None


@dataclass(frozen=True)
class NextCall:
    """What the session's next model call would send, and the token figures it was made with."""

    session: Session
    context: ModelContext
    figures: TokenFigures


@dataclass(frozen=True)
class CompactionHistory:
    """A session's compaction entries (seq order) and its run receipts (newest first)."""

    entries: list[CompactionEntry]
    runs: list[CompactionRun]


@dataclass(frozen=True)
class CompactCommand:
    """What a `/compact` chat message did: the run, the reply text and the figures after it."""

    run: CompactionRun
    reply_text: str
    tokens: SessionFigures
    command: Literal["compact"] = "compact"
    messages: tuple[()] = ()  # the command is not stored
    silent: bool = False


@dataclass(frozen=True)
class TranscriptPage:
    """One page of a session's transcript: JSONL v3 entries in seq order, and whether more follow."""

    session: Session
    entries: list[TranscriptEntry]
    has_more: bool

    @property
    def next_after_seq(self) -> int | None:
        return self.entries[-1]["seq"] if self.has_more else None
