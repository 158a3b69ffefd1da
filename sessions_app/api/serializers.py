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


# --- documentation of the context engine's payloads (sessions_app/api/responses.py) -------------


def _objects(**kwargs: Any) -> serializers.ListField:
    """A list of JSON objects (a new child field each time: DRF binds a field to one parent)."""
    return serializers.ListField(child=serializers.JSONField(), **kwargs)


class CompactionRunOutput(serializers.Serializer):
    """Documentation of `compaction.run_dict`: one compaction run receipt."""

    id = serializers.IntegerField()
    session = serializers.IntegerField()
    trigger = serializers.ChoiceField(choices=["threshold", "overflow", "manual", "budget"])
    state = serializers.CharField(
        help_text="pending, flushing, flushed, flush_skipped, summarizing, committed, failed"
    )
    reason = serializers.CharField(allow_blank=True)
    instructions = serializers.CharField(allow_blank=True)
    flush_outcome = serializers.CharField(allow_blank=True)
    flush = serializers.DictField(help_text="What the memory flush did: status, reason, appended, stored.")
    tokens_before = serializers.IntegerField(allow_null=True)
    tokens_after = serializers.IntegerField(allow_null=True)
    offline = serializers.BooleanField()
    entry = serializers.DictField(
        allow_null=True, help_text="The compaction entry it wrote (JSONL v3 fields)."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class ContextOutput(serializers.Serializer):
    """Documentation of `responses.context_payload`: exactly what the next model call would send."""

    session = serializers.IntegerField()
    model = serializers.CharField(allow_null=True)
    messages = _objects(help_text="The OpenAI chat messages, system prompt first.")
    tools = _objects()
    agent_messages = _objects(help_text="The same messages as OpenClaw AgentMessages.")
    system_prompt = serializers.CharField(allow_blank=True)
    memory_files = serializers.ListField(child=serializers.CharField())
    compaction = serializers.DictField(
        allow_null=True, help_text="{entry_id, first_kept_entry_id} of the summary."
    )
    estimated_tokens = serializers.IntegerField()
    estimated_tokens_uncorrected = serializers.IntegerField()
    context_window = serializers.IntegerField()
    flush_threshold = serializers.IntegerField()
    compaction_threshold = serializers.IntegerField()
    tokens = serializers.DictField()
    pruning = serializers.DictField()


class CompactedOutput(serializers.Serializer):
    run = CompactionRunOutput()
    tokens = serializers.DictField(help_text="The session's token figures after the compaction.")


class CompactionPreviewOutput(serializers.Serializer):
    """Documentation of `CompactionPreview.as_dict` (a dry run; nothing written)."""

    dry_run = serializers.BooleanField()
    trigger = serializers.CharField()
    first_kept_entry_id = serializers.CharField()
    summarized = _objects()
    turn_prefix = _objects()
    is_split_turn = serializers.BooleanField()
    has_previous_summary = serializers.BooleanField()
    tokens_before = serializers.IntegerField()
    tokens_kept = serializers.IntegerField()
    tokens_after_estimate = serializers.IntegerField()
    flush_would_run = serializers.BooleanField()
    flush_skip_reason = serializers.CharField(allow_null=True)
    offline = serializers.BooleanField()
    notes = serializers.ListField(child=serializers.CharField())


class ReplyOutput(serializers.Serializer):
    """Documentation of `agent.reply_payload`; `text` is null for a silent (NO_REPLY) answer."""

    text = serializers.CharField(allow_null=True, allow_blank=True)
    silent = serializers.BooleanField()
    entry_id = serializers.CharField(allow_null=True, required=False)
    compactions = serializers.ListField(child=serializers.IntegerField(), required=False)
    scheduled = serializers.JSONField(required=False)


class TurnOutput(MessagesCreatedOutput):
    """201: the stored messages; with ``respond`` also the reply, compactions run and token figures."""

    reply = ReplyOutput(required=False)
    compactions = CompactionRunOutput(many=True, required=False)
    tokens = serializers.DictField(required=False)


class CompactCommandOutput(serializers.Serializer):
    """200: a `/compact [instructions]` chat message compacted the session (the command is not stored)."""

    command = serializers.ChoiceField(choices=["compact"])
    messages = _objects()
    reply = ReplyOutput()
    run = CompactionRunOutput()
    tokens = serializers.DictField()
