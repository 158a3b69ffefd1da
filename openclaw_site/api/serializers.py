"""Input and output shapes of the assistant, API key and task endpoints."""

from __future__ import annotations

import zoneinfo
from typing import Any

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from openclaw_site.api.base import StrictCharField, StrictSerializer
from openclaw_site.models import API_KEY_PREFIX, ApiKey, Assistant, Scope, Team, WorkspaceAccess
from openclaw_site.usage.ledger import GROUPINGS, UsageRow


def _check_timezone(value: str) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise serializers.ValidationError(
            f"{value!r} is not an IANA time zone (e.g. Europe/Berlin)."
        ) from None


@extend_schema_field({"type": "object", "additionalProperties": True})
class JsonObjectField(serializers.JSONField):
    """The assistant's OpenClaw-style settings, documented as an object (validate_settings checks it)."""


class AssistantFieldsMixin(serializers.Serializer):
    name = StrictCharField(max_length=200)
    model = StrictCharField(max_length=200, allow_blank=True, required=False)
    context_window = serializers.IntegerField(min_value=16000, max_value=100_000_000, required=False)
    system_prompt = StrictCharField(allow_blank=True, required=False, trim_whitespace=False)
    timezone = StrictCharField(max_length=64, required=False, validators=[_check_timezone])
    workspace_access = serializers.ChoiceField(choices=WorkspaceAccess.choices, required=False)
    settings = JsonObjectField(required=False, help_text="OpenClaw-style settings; merged onto the defaults.")


class AssistantCreateInput(StrictSerializer, AssistantFieldsMixin):
    slug = serializers.SlugField(max_length=64)


class AssistantUpdateInput(StrictSerializer, AssistantFieldsMixin):
    """PATCH: every field optional; ``settings`` is merged onto the current settings."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("partial", True)
        super().__init__(*args, **kwargs)


class AssistantOutput(serializers.ModelSerializer):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    settings = JsonObjectField(read_only=True, help_text="The complete settings document, defaults filled.")
    archived = serializers.SerializerMethodField(
        help_text="Archived: read-only until restored (every write answers 409 assistant_archived)."
    )

    class Meta:
        model = Assistant
        fields = [
            "id",
            "slug",
            "team",
            "name",
            "model",
            "context_window",
            "system_prompt",
            "timezone",
            "workspace_access",
            "settings",
            "archived",
            "archived_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_archived(self, assistant: Assistant) -> bool:
        return assistant.archived_at is not None


class ApiKeyCreateInput(StrictSerializer):
    name = StrictCharField(max_length=100)
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.values), min_length=1)
    expires_at = serializers.DateTimeField(required=False, allow_null=True)


class ApiKeyOutput(serializers.ModelSerializer):
    prefix = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active", read_only=True)
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True, help_text="null for keys made by a command."
    )

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "name",
            "prefix",
            "scopes",
            "active",
            "created_by",
            "created_at",
            "expires_at",
            "last_used_at",
            "revoked_at",
        ]
        read_only_fields = fields

    def get_prefix(self, key: ApiKey) -> str:
        """The public start of the secret, enough to recognise a key."""
        return f"{API_KEY_PREFIX}{key.prefix}"


class ApiKeyCreatedOutput(ApiKeyOutput):
    # The secret comes in the serializer's context: the key object never holds it.
    secret = serializers.SerializerMethodField(help_text="Shown once; only its hash is stored.")

    class Meta(ApiKeyOutput.Meta):
        fields = [*ApiKeyOutput.Meta.fields, "secret"]
        read_only_fields = fields

    def get_secret(self, key: ApiKey) -> str:
        """The whole secret, from the serializer's context."""
        secret: str = self.context["secret"]
        return secret


class TaskOutput(serializers.Serializer):
    """A background task: its state, progress and outcome (see openclaw_site.api.views.task_status)."""

    id = serializers.CharField()
    kind = serializers.CharField()
    state = serializers.ChoiceField(choices=["queued", "running", "succeeded", "failed"])
    objects = serializers.DictField(help_text="Ids of the objects the task works on.")
    progress = serializers.DictField(help_text="{done, total, message?} as last reported by the task.")
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    attempts = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class UsageQueryInput(StrictSerializer):
    """The query of ``GET /usage/``: which breakdown, narrowed to an assistant, a session or days."""

    by = serializers.ChoiceField(choices=sorted(GROUPINGS), required=False, help_text="Default: purpose.")
    assistant = serializers.SlugField(required=False, help_text="An assistant's slug.")
    session = serializers.IntegerField(required=False, min_value=1, help_text="A session's id.")
    since = serializers.DateField(required=False, help_text="First day (UTC), inclusive.")
    until = serializers.DateField(required=False, help_text="Last day (UTC), inclusive.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("since") and attrs.get("until") and attrs["since"] > attrs["until"]:
            raise serializers.ValidationError({"since": ["since is after until."]})
        return attrs


class UsageFiguresOutput(serializers.Serializer):
    """The summed figures of one group of `GET /usage/` (or of everything, as ``totals``): a `UsageRow`."""

    key = serializers.SerializerMethodField(help_text="The group: a purpose, slug, session id, model or day.")
    calls = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_write_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cost = serializers.CharField(help_text="US dollars, a decimal string.")
    unpriced_calls = serializers.IntegerField(
        source="unpriced", help_text="Calls of models without a price (counted at 0)."
    )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_key(self, row: UsageRow) -> str | int | None:
        return row.key_text


class UsageReportOutput(serializers.Serializer):
    """A `UsageReport`."""

    by = serializers.CharField()
    totals = UsageFiguresOutput()
    rows = UsageFiguresOutput(many=True)
