"""A compaction that did not happen: busy, refused or failed, each a `DomainError` with its run, and the run and entry as the adapters show them (docs/architecture.md, Errors)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from openclaw_site.errors import DomainError
from sessions_app.models import (
    CompactionEntry,
    CompactionRun,
)
from sessions_app.transcript import (
    compaction_entry_dict,
)

logger = logging.getLogger(__name__)


class CompactionError(DomainError):
    """Why a compaction did not happen: busy, refused or failed (docs/architecture.md, Errors).

    Each owns its code, message and status; ``run`` is the run it concerns when there is one (the
    one running, or the one that recorded the refusal or failure), and the details show it.
    ``outcome`` is the word a background task reports it by.
    """

    outcome: ClassVar[str]

    def __init__(self, code: str, message: str, *, status: int, run: CompactionRun | None = None) -> None:
        super().__init__(code, message, status=status)
        self.run = run

    @property
    def details(self) -> dict[str, Any]:
        return {"run": run_dict(self.run)} if self.run is not None else {}


class CompactionBusy(CompactionError):
    """Another compaction of this session is running."""

    outcome = "busy"

    def __init__(self, run: CompactionRun) -> None:
        super().__init__(
            "compaction_in_progress",
            "A compaction of this session is already running; try again when it has finished.",
            status=409,
            run=run,
        )
        self.run: CompactionRun = run

    @property
    def details(self) -> dict[str, Any]:
        return {"run": self.run.pk}


class CompactionRefused(CompactionError):
    """Pi's refusals: the last entry is already a compaction, or there is nothing to compact."""

    outcome = "refused"


class CompactionFailed(CompactionError):
    """The summary could not be made; nothing was written (the run records the reason)."""

    outcome = "failed"

    def __init__(self, run: CompactionRun) -> None:
        super().__init__("compaction_failed", compaction_failure_message(run), status=502, run=run)
        self.run: CompactionRun = run

    @property
    def details(self) -> dict[str, Any]:
        return {"run": run_dict(self.run), "flush": self.run.flush_details or None}


def compaction_failure_message(run: CompactionRun) -> str:
    """Say what a failed compaction left behind: nothing, or what its memory flush wrote first."""
    flush = run.flush_details or {}
    stored, appended = flush.get("stored") or [], flush.get("appended") or []
    if not stored and not appended:
        return f"Compaction failed: {run.reason}. Nothing was written; the history is unchanged."
    wrote = []
    if stored:
        wrote.append(f"stored {len(stored)} silent flush message(s) ({', '.join(stored)})")
    if appended:
        paths = sorted({item.get("path", "") for item in appended})
        wrote.append(f"appended to {', '.join(paths)}")
    return (
        f"Compaction failed: {run.reason}. No summary was written, so the model still sees the whole "
        f"history; the memory flush before it {' and '.join(wrote)}."
    )


def run_dict(run: CompactionRun) -> dict[str, Any]:
    """Return a CompactionRun receipt as every answer shows it (REST, the plugin's endpoints, errors)."""
    return {
        "id": run.pk,
        "session": run.session_id,
        "trigger": run.trigger,
        "state": run.state,
        "reason": run.reason,
        "instructions": run.instructions,
        "flush_outcome": run.flush_outcome,
        "flush": run.flush_details,
        "tokens_before": run.tokens_before,
        "tokens_after": run.tokens_after,
        "offline": run.offline,
        "entry": entry_dict(run.entry) if run.entry is not None else None,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def entry_dict(entry: CompactionEntry) -> dict[str, Any]:
    """Return a compaction entry: the JSONL v3 fields plus ours (trigger, tokens after, offline)."""
    return {
        **compaction_entry_dict(entry),
        "tokensAfter": entry.tokens_after,
        "trigger": entry.trigger,
        "offline": entry.offline,
    }


class SessionGone(Exception):
    """The session was deleted while its compaction ran (its run went with it)."""


SESSION_DELETED = (
    "session_deleted",
    "The session was deleted, so the compaction stopped and wrote nothing.",
    410,
)


ALREADY_COMPACTED = ("already_compacted", "Already compacted: the latest entry is a compaction.", 409)


NOTHING_TO_COMPACT = ("nothing_to_compact", "Nothing to compact (session too small).", 422)
