"""The transcript as the session page shows it (no HTTP here; `sessions_app.web.views` renders it).

Messages are never deleted by compaction, so the page must show two things at once: what the model
sees now (the latest summary, then the messages from its first kept one on) and the history behind
each summary. Each compaction entry becomes a card placed where its cut is, holding the summary and,
on demand, the original messages it covered: those from the previous entry's first kept message up
to its own first kept message (the previous summary itself was fed into the new one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sessions_app.models import CompactionEntry, Message, Session


@dataclass(frozen=True)
class ToolCallView:
    id: str
    name: str
    arguments: str
    size: int


# Past this a message's text is clipped to a few lines until "Show all" is opened: a phone shows
# about 1,000 characters of text per screen.
LONG_MESSAGE_CHARS = 1200
LONG_MESSAGE_LINES = 24


@dataclass
class MessageView:
    """One stored message, split into what the template shows and collapses."""

    message: Message
    texts: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    tool_calls: list[ToolCallView] = field(default_factory=list)
    images: int = 0
    chars: int = 0

    @property
    def role(self) -> str:
        return self.message.role

    @property
    def silent(self) -> bool:
        return self.message.silent

    @property
    def text(self) -> str:
        return "\n\n".join(self.texts)

    @property
    def anchor(self) -> str:
        return f"m-{self.message.seq}"

    @property
    def long(self) -> bool:
        """Whether the text is shown clipped with a "Show all" control (docs/dashboard.md, Sessions)."""
        text = self.text
        return len(text) > LONG_MESSAGE_CHARS or text.count("\n") >= LONG_MESSAGE_LINES


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def message_view(message: Message) -> MessageView:
    """Split a message's content blocks into texts, thinking, tool calls and images."""
    view = MessageView(message=message)
    for block in _blocks(message.content):
        kind = block.get("type")
        if kind == "text":
            view.texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            view.thinking.append(str(block.get("thinking", "")))
        elif kind == "toolCall":
            arguments = json.dumps(block.get("arguments", {}), ensure_ascii=False, indent=2)
            view.tool_calls.append(
                ToolCallView(
                    id=str(block.get("id", "")),
                    name=str(block.get("name", "")),
                    arguments=arguments,
                    size=len(arguments),
                )
            )
        elif kind == "image":
            view.images += 1
    view.chars = (
        sum(map(len, view.texts)) + sum(map(len, view.thinking)) + sum(c.size for c in view.tool_calls)
    )
    return view


@dataclass
class Group:
    """Consecutive messages of the same visibility: normal ones, or a silent turn behind the toggle."""

    silent: bool
    messages: list[MessageView]

    @property
    def is_flush(self) -> bool:
        return any(getattr(m.message, "flush_turn", False) for m in self.messages)


@dataclass
class CompactionCard:
    """A compaction entry with the range of original messages it summarised."""

    entry: CompactionEntry
    number: int
    covered_from_seq: int
    covered_to_seq: int  # exclusive: the first kept message's seq
    covered_count: int
    run: Any = None

    @property
    def tokens_saved(self) -> int | None:
        if self.entry.tokens_after is None:
            return None
        return self.entry.tokens_before - self.entry.tokens_after


@dataclass
class Transcript:
    cards: list[CompactionCard]
    live: list[Group]
    silent_count: int
    last_seq: int


def group_messages(views: Iterable[MessageView]) -> list[Group]:
    """Cut a run of messages into groups where the silent flag changes."""
    groups: list[Group] = []
    for view in views:
        if groups and groups[-1].silent == view.silent:
            groups[-1].messages.append(view)
        else:
            groups.append(Group(silent=view.silent, messages=[view]))
    return groups


def _first_kept_seq(entry: CompactionEntry, by_entry_id: dict[str, Message]) -> int:
    kept = entry.first_kept or by_entry_id.get(entry.first_kept_entry_id)
    # A first kept message that no longer exists: everything before the entry was summarised.
    return kept.seq if kept is not None else entry.seq


def compaction_cards(session: Session, messages: list[Message]) -> list[CompactionCard]:
    """Return the session's compaction entries in order, each with the message range it covered."""
    by_entry_id = {m.entry_id: m for m in messages}
    entries = list(
        CompactionEntry.objects.filter(session=session).select_related("first_kept").order_by("seq")
    )
    runs = _runs_by_entry([e.pk for e in entries])
    cards, previous_cut = [], 0
    for number, entry in enumerate(entries, start=1):
        cut = max(_first_kept_seq(entry, by_entry_id), previous_cut)
        count = sum(1 for m in messages if previous_cut <= m.seq < cut)
        cards.append(
            CompactionCard(
                entry=entry,
                number=number,
                covered_from_seq=previous_cut,
                covered_to_seq=cut,
                covered_count=count,
                run=runs.get(entry.pk),
            )
        )
        previous_cut = cut
    return cards


def _runs_by_entry(entry_ids: list[int]) -> dict[int, Any]:
    from sessions_app.models import CompactionRun

    runs = CompactionRun.objects.filter(entry_id__in=entry_ids)
    return {run.entry_id: run for run in runs if run.entry_id is not None}


def build_transcript(session: Session) -> Transcript:
    """Return the compaction cards and the live (not yet compacted) messages of a session."""
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    cards = compaction_cards(session, messages)
    cut = cards[-1].covered_to_seq if cards else 0
    live = [message_view(m) for m in messages if m.seq >= cut]
    return Transcript(
        cards=cards,
        live=group_messages(live),
        silent_count=sum(1 for m in live if m.silent),
        last_seq=session.last_seq,
    )


def covered_messages(session: Session, card: CompactionCard) -> list[Group]:
    """Return the original messages a compaction entry summarised, grouped like the live ones."""
    messages = Message.objects.filter(
        session=session, seq__gte=card.covered_from_seq, seq__lt=card.covered_to_seq
    ).order_by("seq")
    return group_messages(message_view(m) for m in messages)
