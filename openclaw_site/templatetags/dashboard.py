"""Template filters of the dashboard."""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    """``{{ dict|get_item:key }}``."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def tokens(value: Any) -> str:
    """12345 → "12.3k", 980 → "980"."""
    if value is None:
        return "—"
    number = int(value)
    if abs(number) >= 1000:
        return f"{number / 1000:.1f}k".replace(".0k", "k")
    return str(number)


@register.filter
def size(chars: Any) -> str:
    """A character count as people read it: 980 chars, 12.3k chars."""
    if chars is None:
        return ""
    number = int(chars)
    return f"{number} chars" if number < 1000 else f"{number / 1000:.1f}k chars"


@register.filter
def percent(part: Any, whole: Any) -> float:
    """``part`` as a percentage of ``whole`` (0..100, for CSS widths), 0 when unknown."""
    try:
        return max(0.0, min(100.0, 100.0 * float(part) / float(whole)))
    except (TypeError, ValueError, ZeroDivisionError):
        return 0.0


@register.filter
def css_number(value: Any) -> str:
    """A float for inline CSS with a dot whatever the locale: 42.5."""
    try:
        return f"{float(value):.2f}"
    except (TypeError, ValueError):
        return "0"


@register.filter
def ago(moment: Any) -> str:
    """ "just now", "5 minutes ago", "2 days ago"."""
    from django.utils import timezone
    from django.utils.timesince import timesince

    if not moment:
        return ""
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment).split(',')[0]} ago"


@register.filter
def basename(path: str) -> str:
    """memory/projects/launch.md → launch.md."""
    return (path or "").rsplit("/", 1)[-1]


_FALLBACKS = {
    "no_embedder": "no embedder configured: keyword search only",
    "index_rebuilding": "the vector index is being rebuilt: keyword search meanwhile",
    "empty_query_vector": "the query has no vector: keyword search only",
    "empty_query": "empty query",
}


@register.filter
def fallback_text(code: str) -> str:
    """Say in words why a search ran differently from the request (memory_app.search.hybrid fallbacks)."""
    head, _, detail = (code or "").partition(": ")
    if head == "embedding_failed":
        return f"embedding failed ({detail}): keyword search only"
    if head == "fulltext_failed":
        return f"keyword search failed ({detail}): vectors only"
    return _FALLBACKS.get(code, code)


@register.filter
def money(value: Any) -> str:
    """A cost in US dollars: $0 for nothing, four decimals below a cent, two above."""
    amount = float(value or 0)
    if amount == 0:
        return "$0"
    return f"${amount:.4f}" if abs(amount) < 0.01 else f"${amount:,.2f}"


@register.filter
def model_name(assistant: Any) -> str:
    """The model an assistant's turns use: its own, else the server's LLM_MODEL."""
    from django.conf import settings

    return str(getattr(assistant, "model", "") or settings.LLM_MODEL or "no model configured")


@register.filter
def markdown(text: str) -> SafeString:
    """Render Markdown as sanitized HTML (openclaw_site.platform.markdown: nothing executable survives)."""
    from openclaw_site.platform.markdown import render_markdown

    return mark_safe(render_markdown(text))


_STATUS_WORDS = {
    "flushed": "memory flushed",
    "flushed(offline)": "memory flushed offline (no model)",
    "flush_skipped": "flush skipped",
    "flushing": "flushing memory",
    "summarizing": "summarising",
    "pending": "waiting",
}
_REASON_WORDS = {
    "already-flushed": "already flushed this cycle",
    "read-only": "the workspace is read-only",
    "disabled": "the flush is turned off",
}
_CODED = re.compile(r"^flush_(\w+)\((.*)\)$")


@register.filter
def status_words(code: str) -> str:
    """A run state or flush outcome in words: ``flush_skipped(already-flushed)`` → "flush skipped:
    already flushed this cycle"."""
    code = code or ""
    if code in _STATUS_WORDS:
        return _STATUS_WORDS[code]
    coded = _CODED.match(code)
    if coded:
        status, reason = coded.groups()
        return f"flush {status.replace('_', ' ')}: {_REASON_WORDS.get(reason, reason.replace('-', ' '))}"
    return code.replace("_", " ")
