"""Tenancy: teams, their members and API keys, and the assistants they run."""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from openclaw_site.teams.assistant_settings import (
    AssistantSettings,
    SettingsError,
    default_settings,
    parse_settings,
)

logger = logging.getLogger(__name__)


class Team(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the user last switched to this team: the one they sign in to next time.
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="membership_user_team_unique"),
            models.CheckConstraint(condition=models.Q(role__in=Role.values), name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class Scope(models.TextChoices):
    SESSIONS_READ = "sessions:read"
    SESSIONS_WRITE = "sessions:write"
    MEMORY_READ = "memory:read"
    MEMORY_WRITE = "memory:write"
    ADMIN = "admin"


API_KEY_PREFIX = "ocs_"


def hash_secret(secret: str) -> str:
    """Return the stored form of an API key: its SHA-256 (keys are random, so no salt is needed)."""
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKey(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({API_KEY_PREFIX}{self.prefix}…)"

    @classmethod
    def generate(cls, **fields: Any) -> tuple[ApiKey, str]:
        """Build (unsaved) a key and return it with its secret, which is shown once and never stored."""
        prefix = secrets.token_hex(4)
        secret = f"{API_KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
        return cls(prefix=prefix, secret_hash=hash_secret(secret), **fields), secret

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()

    def has_scope(self, scope: str) -> bool:
        return Scope.ADMIN in self.scopes or scope in self.scopes


class WorkspaceAccess(models.TextChoices):
    RW = "rw", "Read and write"
    RO = "ro", "Read only"
    NONE = "none", "None"


class Assistant(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="assistants")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    model = models.CharField(max_length=200, blank=True, help_text="Overrides LLM_MODEL when set.")
    context_window = models.PositiveIntegerField(default=200000, validators=[MinValueValidator(16000)])
    system_prompt = models.TextField(blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    workspace_access = models.CharField(max_length=8, choices=WorkspaceAccess, default=WorkspaceAccess.RW)
    settings = models.JSONField(default=default_settings)
    # Archived assistants keep everything and still answer the API; the dashboard lists them apart.
    archived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["team", "slug"], name="assistant_team_slug_unique"),
            models.CheckConstraint(
                condition=models.Q(workspace_access__in=WorkspaceAccess.values), name="assistant_access_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(context_window__gte=16000), name="assistant_window_min"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.slug}"

    @property
    def config(self) -> AssistantSettings:
        """Return the typed settings, parsed once per process for each distinct `settings` document.

        Domain code reads this, never the JSON. It is looked up by the document's canonical JSON
        rather than kept in a `cached_property`, so assigning new settings, editing the dict in
        place, saving or `refresh_from_db` can never leave a stale object behind; the lookup costs
        one `json.dumps`, and a request that loads the assistant afresh does not parse again. A
        stored document that no longer validates (written before a schema change) gives the
        defaults, with a warning in the log, rather than break every turn and search.
        """
        return _parsed_settings(self.pk, json.dumps(self.settings, sort_keys=True))


# Settings objects are frozen, so every instance of an assistant with the same document can share
# one (and an invalid document is reported once per process, not on every read).
@lru_cache(maxsize=1024)
def _parsed_settings(assistant_pk: int | None, document: str) -> AssistantSettings:
    try:
        return parse_settings(json.loads(document))
    except SettingsError as error:
        logger.warning("assistant %s has invalid settings (%s); using defaults", assistant_pk, error)
        return parse_settings(None)


class IdempotencyRecord(models.Model):
    """The first response to a POST with an ``Idempotency-Key``, replayed on retries."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE)
    key = models.CharField(max_length=200)
    request_fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response_body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "key"], name="idempotency_team_key_unique")]

    def __str__(self) -> str:
        return f"{self.team_id}:{self.key}"


class TaskState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class TaskRecord(models.Model):
    """A background task and whose it is, written when it is queued (`openclaw_site.jobs.tasks.enqueue`).

    django-q2's own rows carry no team, so the jobs page and ``GET /tasks/{id}/`` read these: a task
    id that is unknown or belongs to another team is a 404. The worker keeps the state, times,
    progress and error here (`openclaw_site.jobs.runs.run_tracked`). A coalescing task (an export or an
    index of one object) has a ``coalesce_key``: at most one record per key is queued, and newer
    changes fold into it, counted in ``coalesced``.
    """

    task_id = models.CharField(max_length=64, unique=True)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="task_records")
    # The assistant the task works for, when there is one. A deleted assistant's tasks stay in the
    # team's history (SET_NULL); a deleted team takes its tasks with it.
    assistant = models.ForeignKey(
        Assistant, null=True, blank=True, on_delete=models.SET_NULL, related_name="task_records"
    )
    kind = models.CharField(max_length=64)
    # Ids of the objects the task works on, e.g. {"assistant": 3} or {"assistant": 3, "session": 12}.
    object_ids = models.JSONField(default=dict, blank=True)
    # django-q2's id once the task is in the broker (equal to task_id for record_task callers).
    q_task_id = models.CharField(max_length=64, blank=True, db_index=True)
    state = models.CharField(max_length=16, choices=TaskState, default=TaskState.QUEUED)
    progress = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # What the pending job stands for, e.g. "export-session:12", and how many later changes folded
    # into it before it started. NULL, not "", for a task of its own: a unique index ignores NULLs.
    coalesce_key = models.CharField(max_length=300, null=True, blank=True)  # noqa: DJ001
    coalesced = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "-created_at"], name="taskrecord_team_created"),
            # The retention purge takes the oldest finished records first.
            models.Index(
                fields=["finished_at"],
                name="taskrecord_finished",
                condition=models.Q(finished_at__isnull=False),
            ),
            # The live records, a bounded few: a sliced run asks between slices whether others
            # are queued or running (`openclaw_site.jobs.status.others_waiting` and its neighbours),
            # which without this read every record the retention keeps.
            models.Index(
                fields=["state", "coalesce_key"],
                name="taskrecord_active",
                condition=models.Q(state__in=["queued", "running"]),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=TaskState.values), name="taskrecord_state_valid"
            ),
            # One pending job per key: the conflict target of the fold in `openclaw_site.jobs.tasks`.
            models.UniqueConstraint(
                fields=["coalesce_key"],
                condition=models.Q(state=TaskState.QUEUED),
                name="taskrecord_one_pending_per_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.task_id} ({self.state})"


class UsagePurpose(models.TextChoices):
    """Why a model was called: the ledger's split of where the tokens went."""

    TURN = "turn", "Turns"
    FLUSH = "flush", "Memory flushes"
    COMPACTION = "compaction", "Compaction summaries"
    EMBEDDING = "embedding", "Embeddings"
    CONSOLIDATION = "consolidation", "Memory consolidation"


class ModelPrice(models.Model):
    """What a model costs, in US dollars per million tokens of each kind (docs/design.md, Usage and cost).

    ``model`` matches a call's model name exactly or as its longest prefix, so ``gpt-4o-mini``
    prices ``gpt-4o-mini-2024-07-18``. Defaults for common models come from a data migration;
    admins edit them in Django admin. A model without a price costs 0 and is shown as unpriced.
    """

    model = models.CharField(max_length=200, unique=True)
    input_per_mtok = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    output_per_mtok = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    cache_read_per_mtok = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    cache_write_per_mtok = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]

    def __str__(self) -> str:
        return self.model


class UsageRecord(models.Model):
    """The tokens of one model call (or one embedding pass) and what they cost when they were spent.

    Written through `openclaw_site.usage.ledger.record_usage` only. The session is an id, not a foreign
    key: this layer knows nothing of sessions (docs/architecture.md, Layers), and a deleted
    session's or assistant's spending stays in the team's totals.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="usage_records")
    assistant = models.ForeignKey(
        Assistant, null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_records"
    )
    session_id = models.BigIntegerField(null=True, blank=True)
    purpose = models.CharField(max_length=16, choices=UsagePurpose)
    model = models.CharField(max_length=200)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    priced = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "created_at"], name="usage_team_created"),
            models.Index(fields=["session_id"], name="usage_session"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(purpose__in=UsagePurpose.values), name="usage_purpose_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} {self.model} ({self.team_id})"


class TeamSearchMark(models.Model):
    """When a team last searched, and last asked for more searches at once than its slots, as
    any web process saw it (openclaw_site.usage.fair_share).

    A team that asks for more than its share rests between its searches while another team
    searches; each process writes a team's mark at most once a second, so the table holds a row
    per team and changes little.
    """

    # No foreign key in the database: a mark is written on the slot's own connection, which may
    # not see a team created in a transaction still open, and a mark must never fail a search.
    team = models.OneToOneField(
        Team, on_delete=models.CASCADE, primary_key=True, related_name="+", db_constraint=False
    )
    searched_at = models.DateTimeField(null=True, db_index=True)
    refused_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.team_id} searched at {self.searched_at:%H:%M:%S}"
