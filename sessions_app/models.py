"""Sessions: transcripts of messages and compaction entries, and the receipts of compaction runs."""

from __future__ import annotations

import secrets
import uuid

from django.db import models

from openclaw_site.models import Assistant


def new_entry_id() -> str:
    """Return an 8-hex-character entry id, like Pi's `SessionManager` (docs/openclaw-behaviour.md §1.1)."""
    return secrets.token_hex(4)


def new_session_key() -> str:
    return uuid.uuid4().hex[:12]


class Session(models.Model):
    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="sessions")
    key = models.CharField(max_length=128, default=new_session_key)
    session_uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    title = models.CharField(max_length=200, blank=True)
    # One per-session sequence shared by messages and compaction entries, advanced under a row lock.
    last_seq = models.PositiveIntegerField(default=0)
    # OpenClaw's SessionEntry figures (docs/openclaw-behaviour.md §1.1 A).
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens_fresh = models.BooleanField(default=False)
    last_usage = models.JSONField(null=True, blank=True)
    compaction_count = models.PositiveIntegerField(default=0)
    memory_flush_at = models.DateTimeField(null=True, blank=True)
    # NULL means never flushed: OpenClaw conflated "never" with "flushed at cycle 0" (OpenClaw bug reports, docs/openclaw-behaviour.md §5).
    memory_flush_compaction_count = models.PositiveIntegerField(null=True, blank=True)
    last_cache_touch_at = models.DateTimeField(null=True, blank=True)
    # UTF-8 size of every message's stored content (the force-flush measure), kept up to date by
    # each append so that no turn adds up the whole history (docs/design.md §D11).
    transcript_bytes = models.BigIntegerField(default=0)
    # The sum of the stored estimates of every model-visible (not flush-turn) message: the newest
    # message's `running_tokens`, kept by each append (docs/design.md, Request cost).
    message_tokens = models.BigIntegerField(default=0)
    # Archived sessions keep their transcript and export; the dashboard's list hides them by default.
    archived_at = models.DateTimeField(null=True, blank=True)
    # The token budget an agent host that runs its own loop (OpenClaw through its plugin) gave on
    # its last context call: thresholds, pruning and compaction use it in place of the assistant's
    # window while it is set (docs/integrations.md, OpenClaw plugin).
    host_token_budget = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(fields=["assistant", "key"], name="session_assistant_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.assistant}:{self.key}"

    @property
    def context_window(self) -> int:
        """Return the window this session's thresholds follow: the host's budget, else the assistant's."""
        return self.host_token_budget or self.assistant.context_window


class SessionExport(models.Model):
    """What the export mirror's transcript file of a session holds, so the next export only appends.

    docs/design.md, Exports: the file is the header and the entries up to ``seq``, ``size`` bytes
    long; the next line's ``parentId`` is ``entry_id``. Written in the transaction of the export
    that wrote the file, so a crash in between leaves the file longer than ``size`` (cut back on
    the next export) and never a record ahead of the file.
    """

    session = models.OneToOneField(
        Session, on_delete=models.CASCADE, primary_key=True, related_name="export_state"
    )
    # The storage name the file was written under: another one (a renamed key or slug) is unknown.
    file = models.CharField(max_length=1024)
    seq = models.PositiveIntegerField()
    # Empty while the file holds only the header (the next entry has no parent).
    entry_id = models.CharField(max_length=8, blank=True)
    size = models.PositiveBigIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.session_id} exported to #{self.seq} ({self.size} bytes)"


class Role(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL_RESULT = "toolResult"
    SYSTEM = "system"


class Message(models.Model):
    # No index of its own: the unique (session, seq) and (session, entry_id) indexes lead with it,
    # and every append would otherwise write a third one.
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages", db_index=False)
    seq = models.PositiveIntegerField()
    entry_id = models.CharField(max_length=8, default=new_entry_id)
    role = models.CharField(max_length=16, choices=Role)
    # A string or a list of OpenClaw content blocks (text, image, toolCall, thinking), as received.
    content = models.JSONField()
    tool_call_id = models.CharField(max_length=200, blank=True)
    tool_name = models.CharField(max_length=200, blank=True)
    is_error = models.BooleanField(default=False)
    details = models.JSONField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    stop_reason = models.CharField(max_length=16, blank=True)
    error_message = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True)
    provider = models.CharField(max_length=100, blank=True)
    api = models.CharField(max_length=100, blank=True)
    # Silent: a flush turn or a NO_REPLY answer; stored, shown behind a toggle, never a reply.
    silent = models.BooleanField(default=False)
    # Part of a silent pre-compaction memory flush turn: kept in the transcript (the export shows
    # it), never in the model's context or the compaction cut (sessions_app.context.build).
    flush_turn = models.BooleanField(default=False)
    estimated_tokens = models.PositiveIntegerField(default=0)
    # `estimated_tokens` summed over the session's model-visible messages up to this one: the sum
    # over a range of seqs is the difference of two index lookups, not a scan (docs/design.md,
    # Request cost).
    running_tokens = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(db_index=True)
    # Not a column: the stored size of the content (its jsonb text), which the append's insert
    # returns for the session's running total (sessions_app.transcript).
    stored_bytes: int

    class Meta:
        ordering = ["session", "seq"]
        indexes = [
            # The newest assistant usage the context's size is measured from (sessions_app.context.build):
            # found by one index probe however many messages without usage came after it.
            models.Index(
                fields=["session", "seq"],
                condition=models.Q(role="assistant", usage__isnull=False, flush_turn=False)
                & ~models.Q(stop_reason__in=["error", "aborted"]),
                name="message_usage_candidate",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_session_seq_unique"),
            models.UniqueConstraint(fields=["session", "entry_id"], name="message_session_entry_unique"),
            models.CheckConstraint(condition=models.Q(role__in=Role.values), name="message_role_valid"),
            models.CheckConstraint(
                condition=~models.Q(role="toolResult")
                | (~models.Q(tool_call_id="") & ~models.Q(tool_name="")),
                name="message_tool_result_has_call",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session} #{self.seq} {self.role}"


class TurnCommit(models.Model):
    """A turn an agent host committed under its own idempotency key (OpenClaw's ``advancementKey``).

    Written in the transaction that appends the turn's messages, so a retried commit finds it and
    stores nothing (docs/integrations.md, OpenClaw plugin).
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turn_commits")
    advancement_key = models.CharField(max_length=200)
    first_seq = models.PositiveIntegerField()
    last_seq = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "advancement_key"], name="turn_commit_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.session} turn {self.advancement_key}"


class Trigger(models.TextChoices):
    THRESHOLD = "threshold"
    OVERFLOW = "overflow"
    MANUAL = "manual"
    BUDGET = "budget"


class CompactionEntry(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compactions")
    seq = models.PositiveIntegerField()
    entry_id = models.CharField(max_length=8, default=new_entry_id)
    summary = models.TextField()
    first_kept = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    first_kept_entry_id = models.CharField(max_length=8)
    tokens_before = models.PositiveIntegerField()
    tokens_after = models.PositiveIntegerField(null=True, blank=True)
    trigger = models.CharField(max_length=16, choices=Trigger)
    details = models.JSONField(default=dict, blank=True)
    from_hook = models.BooleanField(default=True)
    offline = models.BooleanField(default=False)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["session", "seq"]
        verbose_name_plural = "compaction entries"
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="compaction_session_seq_unique"),
            models.UniqueConstraint(fields=["session", "entry_id"], name="compaction_session_entry_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.session} #{self.seq} compaction ({self.trigger})"


class RunState(models.TextChoices):
    PENDING = "pending"
    FLUSHING = "flushing"
    FLUSHED = "flushed"
    FLUSH_SKIPPED = "flush_skipped"
    SUMMARIZING = "summarizing"
    COMMITTED = "committed"
    FAILED = "failed"


# A run in one of these states holds the session's compaction lock (see CompactionRun.Meta).
ACTIVE_RUN_STATES = (
    RunState.PENDING,
    RunState.FLUSHING,
    RunState.FLUSHED,
    RunState.FLUSH_SKIPPED,
    RunState.SUMMARIZING,
)


class CompactionRun(models.Model):
    """The receipt of every compaction attempt: pending → flushing → flushed|flush_skipped →
    summarizing → committed|failed (docs/design.md, Data model)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compaction_runs")
    trigger = models.CharField(max_length=16, choices=Trigger)
    state = models.CharField(max_length=16, choices=RunState, default=RunState.PENDING)
    reason = models.TextField(blank=True)
    instructions = models.TextField(blank=True)
    flush_outcome = models.CharField(max_length=64, blank=True)
    flush_details = models.JSONField(default=dict, blank=True)
    entry = models.OneToOneField(
        CompactionEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="run"
    )
    tokens_before = models.PositiveIntegerField(null=True, blank=True)
    tokens_after = models.PositiveIntegerField(null=True, blank=True)
    offline = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # The per-session compaction lock: Postgres lets only one active run exist per session,
            # across processes and hosts; a crashed worker's run is expired by
            # sessions_app.compaction.compact (stale-run recovery), never left holding the lock forever.
            models.UniqueConstraint(
                fields=["session"],
                condition=models.Q(state__in=[s.value for s in ACTIVE_RUN_STATES]),
                name="compaction_run_one_active_per_session",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session} compaction run {self.pk} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_RUN_STATES


class ModelCalibration(models.Model):
    """Estimated vs provider-reported prompt tokens of one model, summed over its calls.

    docs/design.md §D3: the ratio corrects our CJK-weighted estimates wherever no reported usage
    covers a message (thresholds, tokens_after, /context).
    """

    model = models.CharField(max_length=200, unique=True)
    estimated_tokens = models.BigIntegerField(default=0)
    reported_tokens = models.BigIntegerField(default=0)
    samples = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]

    def __str__(self) -> str:
        return f"{self.model}: {self.reported_tokens}/{self.estimated_tokens} over {self.samples} calls"
