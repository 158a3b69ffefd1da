"""Compaction summaries: the safeguard pipeline with an injected model call, and the offline fallback.

Pure package: no Django, no network; its tests need no database. This face exports what the rest
of the project uses; tests may import the modules themselves: `prompts` (the texts the model is
sent), `instructions`, `serialisation` (the request, the real-conversation test, tool failures),
`turns` (recent-turn preservation), `staging` (chunking, staged summarisation, history-share
pruning), `identifiers` (extraction, survival, the 16000-char cap), `pipeline`
(`summarize_session`) and `offline` (the deterministic summariser and flush extractor), all on top
of `content` (reading message blocks). The summariser's knobs come in as
`openclaw_site.teams.assistant_settings.SummarySettings`, part of the assistant's typed settings.
"""

from __future__ import annotations

from sessions_app.compaction.summary.identifiers import (
    MAX_COMPACTION_SUMMARY_CHARS,
    ensure_identifiers,
    message_source_texts,
)
from sessions_app.compaction.summary.offline import offline_flush_lines, offline_summary
from sessions_app.compaction.summary.pipeline import summarize_session
from sessions_app.compaction.summary.staging import SummaryError

__all__ = [
    "MAX_COMPACTION_SUMMARY_CHARS",
    "SummaryError",
    "ensure_identifiers",
    "message_source_texts",
    "offline_flush_lines",
    "offline_summary",
    "summarize_session",
]
