"""The system prompt: the assistant's own, the memory files injected into it and the memory guidance, in the assistant's time zone (docs/openclaw-behaviour.md §3)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import connection

from memory_app.documents import daily_note_path
from memory_app.models import MemoryDocument
from openclaw_site.models import Assistant

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."


# OpenClaw `bootstrapMaxChars` (20000 per injected file), trimmed head 70 % + tail 20 %.
MAX_INJECTED_FILE_CHARS = 20_000


MEMORY_FILES_HEADER = "# Project Context\n\nThe following memory files have been loaded:"


MEMORY_GUIDANCE = (
    "## Memory\n"
    "Your long-term memory is Markdown: MEMORY.md and daily notes memory/YYYY-MM-DD.md. "
    "Read more of it with memory_get{search_hint}.\n"
    "A tool result shortened to save context names its original message; call tool_result_get "
    "with that id to read it in full."
)


SEARCH_HINT = (
    "; before answering questions about prior work, decisions, dates, people, preferences or "
    "todos, run memory_search first"
)


def assistant_zone(assistant: Assistant) -> ZoneInfo:
    """Return the assistant's timezone; an invalid one falls back to UTC (`resolveUserTimezone`)."""
    try:
        return ZoneInfo((assistant.timezone or "UTC").strip())
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def local_today(assistant: Assistant, now: datetime) -> date:
    """Return today's date in the assistant's timezone."""
    return now.astimezone(assistant_zone(assistant)).date()


@dataclass(frozen=True)
class SystemPrompt:
    """The system prompt sent to the model and the memory documents injected into it."""

    text: str
    memory_paths: tuple[str, ...]
    memory_text: str = ""  # the injected memory files' part of ``text`` (for the context breakdown)


def build_system_prompt(
    assistant: Assistant, *, now: datetime, tool_names: tuple[str, ...] = ()
) -> SystemPrompt:
    """Compose the assistant's system prompt, memory guidance, MEMORY.md and the daily notes."""
    memory = memory_prompt(assistant, now=now, tool_names=tool_names)
    head = (assistant.system_prompt or "").strip() or DEFAULT_SYSTEM_PROMPT
    return SystemPrompt(
        text=f"{head}\n\n{memory.text}", memory_paths=memory.memory_paths, memory_text=memory.memory_text
    )


def memory_prompt(assistant: Assistant, *, now: datetime, tool_names: tuple[str, ...] = ()) -> SystemPrompt:
    """Compose the memory part of the system prompt: guidance, MEMORY.md and the daily notes.

    A host with a system prompt of its own (OpenClaw through its plugin) is sent this part alone.
    """
    today = local_today(assistant, now)
    wanted = ["MEMORY.md", "memory.md", daily_note_path(today), daily_note_path(today - timedelta(days=1))]
    # Every turn and context build reads these: plain SQL (docs/design.md, Request cost).
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT path, content FROM {MemoryDocument._meta.db_table} WHERE assistant_id = %s AND path = ANY(%s)",
            [assistant.pk, wanted],
        )
        documents = dict(cursor.fetchall())
    if "MEMORY.md" in documents:
        documents.pop("memory.md", None)  # OpenClaw loads MEMORY.md, else memory.md
    injected = [(path, documents[path]) for path in wanted if documents.get(path, "").strip()]
    parts = [MEMORY_GUIDANCE.format(search_hint=SEARCH_HINT if "memory_search" in tool_names else "")]
    parts.append(f"Time zone: {assistant_zone(assistant).key}")
    memory = [f"## {path}\n\n{trim_injected_file(content, path)}" for path, content in injected]
    if injected:
        parts += [MEMORY_FILES_HEADER, *memory]
    return SystemPrompt(
        text="\n\n".join(parts),
        memory_paths=tuple(path for path, _ in injected),
        memory_text="\n\n".join(memory),
    )


def trim_injected_file(content: str, path: str, *, max_chars: int = MAX_INJECTED_FILE_CHARS) -> str:
    """Keep the head (70 %) and tail (20 %) of a long file, saying so (OpenClaw `trimBootstrapContent`)."""
    content = content.rstrip()
    if len(content) <= max_chars:
        return content
    head, tail = int(max_chars * 0.7), int(max_chars * 0.2)
    marker = (
        f"\n[...truncated, read {path} for full content...]\n"
        f"…(truncated {path}: kept {head}+{tail} chars of {len(content)})…\n"
    )
    return content[:head] + marker + content[-tail:]
