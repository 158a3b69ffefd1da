"""Input and output shapes of the session and message endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from openclaw_site.api.base import StrictCharField, StrictSerializer
from openclaw_site.models import Assistant
from sessions_app.context import session_figures
from sessions_app.models import Message, Session
from sessions_app.transcript import to_agent_message


class SessionCreateInput(StrictSerializer):
    key = StrictCharField(
        max_length=128, required=False, help_text="Letters, digits and . _ : @ + = -; random when omitted."
    )
    title = StrictCharField(max_length=200, required=False, allow_blank=True, default="")


class SessionUpdateInput(StrictSerializer):
    title = StrictCharField(max_length=200, allow_blank=True)


class SessionOutput(serializers.ModelSerializer):
    """A session with the token figures the context engine keeps (OpenClaw's SessionEntry fields)."""

    assistant: serializers.SlugRelatedField[Assistant] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    message_count = serializers.SerializerMethodField()
    tokens = serializers.SerializerMethodField(
        help_text="Context estimate, window, flush and compaction thresholds (sessions_app.context.session_figures)."
    )

    class Meta:
        model = Session
        fields = [
            "id",
            "key",
            "session_uuid",
            "assistant",
            "title",
            "last_seq",
            "message_count",
            "total_tokens",
            "total_tokens_fresh",
            "last_usage",
            "compaction_count",
            "memory_flush_at",
            "memory_flush_compaction_count",
            "last_cache_touch_at",
            "tokens",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_tokens(self, session: Session) -> dict[str, Any]:
        return session_figures(session)

    def get_message_count(self, session: Session) -> int:
        counted = getattr(session, "message_count", None)
        return counted if counted is not None else session.messages.count()


def stored_message_dict(message: Message) -> dict[str, Any]:
    """Return a stored message as the API shows it: OpenClaw's AgentMessage plus our storage fields."""
    return {
        **to_agent_message(message),
        "id": message.pk,
        "seq": message.seq,
        "entry_id": message.entry_id,
        "silent": message.silent,
        "estimated_tokens": message.estimated_tokens,
        "created_at": message.created_at.isoformat(),
    }


class StoredMessageOutput(serializers.Serializer):
    """Documentation of `stored_message_dict` (role-specific keys follow OpenClaw's AgentMessage)."""

    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    entry_id = serializers.CharField()
    entryId = serializers.CharField()
    role = serializers.ChoiceField(choices=["user", "assistant", "toolResult", "system"])
    content = serializers.JSONField()
    timestamp = serializers.IntegerField(help_text="epoch milliseconds")
    silent = serializers.BooleanField()
    estimated_tokens = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    toolCallId = serializers.CharField(required=False)
    toolName = serializers.CharField(required=False)
    isError = serializers.BooleanField(required=False)
    usage = serializers.JSONField(required=False, allow_null=True)
    stopReason = serializers.CharField(required=False)
    model = serializers.CharField(required=False)


class MessagesCreatedOutput(serializers.Serializer):
    messages = StoredMessageOutput(many=True)


class MessagePostInput(serializers.Serializer):
    """One message (OpenClaw AgentMessage fields) or ``{"messages": [...]}`` for an atomic batch."""

    role = serializers.ChoiceField(choices=["user", "assistant", "toolResult", "system"], required=False)
    content = serializers.JSONField(required=False, help_text="A string or a list of content blocks.")
    timestamp = serializers.JSONField(
        required=False, help_text="ISO-8601 or epoch milliseconds; default now."
    )
    toolCallId = serializers.CharField(required=False)
    toolName = serializers.CharField(required=False)
    isError = serializers.BooleanField(required=False)
    usage = serializers.JSONField(required=False)
    stopReason = serializers.CharField(required=False)
    model = serializers.CharField(required=False)
    silent = serializers.BooleanField(required=False)
    respond = serializers.BooleanField(required=False, help_text="On a single user message: ask for a reply.")
    stream = serializers.BooleanField(
        required=False,
        help_text="With respond: answer text/event-stream (started, delta, tool_call, tool_result, done, error).",
    )
    messages = serializers.ListField(
        child=serializers.JSONField(), required=False, help_text="A batch, stored all or nothing."
    )


class TranscriptPageOutput(serializers.Serializer):
    session = serializers.IntegerField()
    last_seq = serializers.IntegerField()
    entries = serializers.ListField(
        child=serializers.JSONField(),
        help_text="JSONL v3 entries ('message' or 'compaction') with seq, in seq order.",
    )
    has_more = serializers.BooleanField()
    next_after_seq = serializers.IntegerField(allow_null=True)
