"""The `/compact` command typed in a chat: parsing it and the reply that says what it did (docs/openclaw-behaviour.md §1.4 T5)."""

from __future__ import annotations

import logging

from sessions_app.models import (
    CompactionRun,
)

logger = logging.getLogger(__name__)


NOT_A_COMMAND = object()


def parse_compact_command(text: str) -> str | object | None:
    """Return the instructions of a `/compact [instructions]` message, None for none, else NOT_A_COMMAND.

    OpenClaw (`commands-compact.ts`): exactly `/compact` or `/compact <text>`, case-insensitive;
    the text after it, with an optional leading `:`, trimmed, becomes the custom instructions.
    """
    trimmed = (text or "").strip()
    lowered = trimmed.lower()
    if lowered != "/compact" and not lowered.startswith(("/compact ", "/compact:", "/compact\n")):
        return NOT_A_COMMAND
    rest = trimmed[len("/compact") :].lstrip()
    if rest.startswith(":"):
        rest = rest[1:].lstrip()
    return rest.strip() or None


def format_token_count(value: int) -> str:
    """Format a token count the way OpenClaw's status line does (`12k`, `3.4k`, `1.2m`)."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}m".replace(".0m", "m")
    if value >= 10_000:
        return f"{round(value / 1000)}k"
    if value >= 1_000:
        return f"{value / 1000:.1f}k".replace(".0k", "k")
    return str(value)


def manual_reply_text(run: CompactionRun, *, context_window: int) -> str:
    """Return `⚙️ Compacted (<before> → <after>) • Context <after>/<window> (<pct>%)`."""
    before, after = run.tokens_before or 0, run.tokens_after or 0
    percent = min(999, round(after / context_window * 100)) if context_window else 0
    context = f"Context {format_token_count(after)}/{format_token_count(context_window)} ({percent}%)"
    label = "Compacted (offline summary)" if run.offline else "Compacted"
    return f"⚙️ {label} ({format_token_count(before)} → {format_token_count(after)}) • {context}"
