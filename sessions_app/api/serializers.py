"""Input and output shapes of the session and message endpoints."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import ReturnList

from openclaw_site.api.base import StrictCharField, StrictSerializer
from openclaw_site.models import Assistant
from providers.message_types import OpenAITool
from sessions_app.api.answers import CompactionHistory, CompactionRef, NextCall
from sessions_app.compaction.compact import CompactionPreview
from sessions_app.compaction.errors import entry_dict
from sessions_app.context.build import PruningDict
from sessions_app.context.figures import SessionFigures, TokenFiguresDict, session_figures
from sessions_app.models import CompactionRun, Message, Session
from sessions_app.transcript import to_agent_message
from sessions_app.turn.events import TurnResult


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
        help_text="Context estimate, window, flush and compaction thresholds (sessions_app.context.figures.session_figures)."
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

    def get_tokens(self, session: Session) -> SessionFigures:
        return session_figures(session)

    def get_message_count(self, session: Session) -> int:
        counted = getattr(session, "message_count", None)
        return counted if counted is not None else session.messages.count()


class IsoDateTimeField(serializers.DateTimeField):
    """A time as Python's ``isoformat()`` writes it (``+00:00``), as the transcript's times are."""

    def to_representation(self, value: datetime.datetime) -> str:
        return value.isoformat()


# What `StoredMessageOutput` adds to OpenClaw's AgentMessage: our storage fields.
STORAGE_FIELDS = ("id", "seq", "entry_id", "silent", "estimated_tokens", "created_at")


class StoredMessageOutput(serializers.Serializer):
    """A stored message: OpenClaw's AgentMessage (role-specific keys) plus our storage fields.

    The AgentMessage part is `sessions_app.transcript.to_agent_message`, shared with the JSONL
    transcript; the storage fields follow it.
    """

    entryId = serializers.CharField()
    role = serializers.ChoiceField(choices=["user", "assistant", "toolResult", "system"])
    content = serializers.JSONField()
    timestamp = serializers.IntegerField(help_text="epoch milliseconds")
    toolCallId = serializers.CharField(required=False)
    toolName = serializers.CharField(required=False)
    isError = serializers.BooleanField(required=False)
    usage = serializers.JSONField(required=False, allow_null=True)
    stopReason = serializers.CharField(required=False)
    model = serializers.CharField(required=False)
    id = serializers.IntegerField(source="pk")
    seq = serializers.IntegerField()
    entry_id = serializers.CharField()
    silent = serializers.BooleanField()
    estimated_tokens = serializers.IntegerField()
    created_at = IsoDateTimeField()

    def to_representation(self, instance: Message) -> dict[str, Any]:
        storage = {name: self._render(name, instance) for name in STORAGE_FIELDS}
        return {**to_agent_message(instance), **storage}

    def _render(self, name: str, message: Message) -> Any:
        field = self.fields[name]
        return field.to_representation(field.get_attribute(message))


def stored_messages_data(messages: Iterable[Message]) -> ReturnList[Any]:
    """Render stored messages with `StoredMessageOutput`."""
    return serializers.ListSerializer(messages, child=StoredMessageOutput()).data


class MessagesCreatedOutput(serializers.Serializer):
    """201 of a plain append: the stored messages."""

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
    """One page of a session's transcript (`sessions_app.api.views.TranscriptPage`)."""

    session = serializers.IntegerField(source="session.pk")
    last_seq = serializers.IntegerField(source="session.last_seq")
    entries = serializers.ListField(
        child=serializers.JSONField(),
        help_text="JSONL v3 entries ('message' or 'compaction') with seq, in seq order.",
    )
    has_more = serializers.BooleanField()
    next_after_seq = serializers.IntegerField(allow_null=True)


# --- the context engine's answers (sessions_app/api/responses.py builds what they render) -------


def _objects(**kwargs: Any) -> serializers.ListField:
    """A list of JSON objects (a new child field each time: DRF binds a field to one parent)."""
    return serializers.ListField(child=serializers.JSONField(), **kwargs)


class CompactionRunOutput(serializers.Serializer):
    """One compaction run receipt (a `CompactionRun`)."""

    id = serializers.IntegerField(source="pk")
    session = serializers.IntegerField(source="session_id")
    trigger = serializers.ChoiceField(choices=["threshold", "overflow", "manual", "budget"])
    state = serializers.CharField(
        help_text="pending, flushing, flushed, flush_skipped, summarizing, committed, failed"
    )
    reason = serializers.CharField(allow_blank=True)
    instructions = serializers.CharField(allow_blank=True)
    flush_outcome = serializers.CharField(allow_blank=True)
    flush = serializers.DictField(
        source="flush_details", help_text="What the memory flush did: status, reason, appended, stored."
    )
    tokens_before = serializers.IntegerField(allow_null=True)
    tokens_after = serializers.IntegerField(allow_null=True)
    offline = serializers.BooleanField()
    entry = serializers.SerializerMethodField(help_text="The compaction entry it wrote (JSONL v3 fields).")
    created_at = IsoDateTimeField()
    updated_at = IsoDateTimeField()
    finished_at = IsoDateTimeField(allow_null=True)

    def get_entry(self, run: CompactionRun) -> dict[str, Any] | None:
        return entry_dict(run.entry) if run.entry is not None else None


class ContextHeadOutput(serializers.Serializer):
    """What the next model call would send (a `NextCall`), but its two message lists.

    The lists are most of a long session's answer; the views splice in their kept JSON
    (`sessions_app.api.responses.context_payload_json`).
    """

    session = serializers.IntegerField(source="session.pk")
    model = serializers.SerializerMethodField()
    tools = serializers.SerializerMethodField()
    system_prompt = serializers.CharField(source="context.system_prompt.text", allow_blank=True)
    memory_files = serializers.ListField(
        child=serializers.CharField(), source="context.system_prompt.memory_paths"
    )
    compaction = serializers.SerializerMethodField(
        help_text="{entry_id, first_kept_entry_id} of the summary."
    )
    estimated_tokens = serializers.IntegerField(source="context.prompt_estimate")
    estimated_tokens_uncorrected = serializers.IntegerField(source="context.raw_prompt_estimate")
    context_window = serializers.IntegerField(source="figures.thresholds.context_window")
    flush_threshold = serializers.IntegerField(source="figures.thresholds.flush_threshold")
    compaction_threshold = serializers.IntegerField(source="figures.thresholds.compaction_threshold")
    tokens = serializers.SerializerMethodField()
    pruning = serializers.SerializerMethodField()
    breakdown = serializers.SerializerMethodField(
        help_text="Estimated tokens per part of the request, and what is left of the window."
    )

    def get_model(self, call: NextCall) -> str | None:
        return call.context.model or None

    @extend_schema_field(_objects())
    def get_tools(self, call: NextCall) -> list[OpenAITool]:
        return [{"type": "function", "function": spec} for spec in call.context.tools]

    def get_compaction(self, call: NextCall) -> CompactionRef | None:
        context = call.context
        if context.compaction_index < 0:
            return None
        entry = context.entries[context.compaction_index]
        return {"entry_id": entry["id"], "first_kept_entry_id": entry["firstKeptEntryId"]}

    @extend_schema_field(serializers.DictField())
    def get_tokens(self, call: NextCall) -> TokenFiguresDict:
        return call.figures.as_dict()

    @extend_schema_field(serializers.DictField())
    def get_pruning(self, call: NextCall) -> PruningDict:
        return call.context.pruning.as_dict()

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_breakdown(self, call: NextCall) -> dict[str, int]:
        return call.context.breakdown(context_window=call.figures.thresholds.context_window).as_dict()


class ContextOutput(ContextHeadOutput):
    """The whole context answer (its schema): the head and the two message lists."""

    messages = _objects(
        source="context.openai_messages", help_text="The OpenAI chat messages, system prompt first."
    )
    agent_messages = _objects(
        source="context.agent_messages", help_text="The same messages as OpenClaw AgentMessages."
    )


class CompactedOutput(serializers.Serializer):
    """201 of ``POST /compact/``: the run and the session's token figures after it."""

    run = CompactionRunOutput()
    tokens = serializers.DictField(help_text="The session's token figures after the compaction.")


class CompactionPreviewOutput(serializers.Serializer):
    """A dry run (a `CompactionPreview`): what would be summarised and kept; nothing written."""

    dry_run = serializers.SerializerMethodField()
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

    def get_dry_run(self, preview: CompactionPreview) -> bool:
        return True


class CompactionsOutput(serializers.Serializer):
    """``GET /compactions/``: the compaction entries (seq order) and the run receipts (newest first)."""

    entries = serializers.SerializerMethodField()
    runs = CompactionRunOutput(many=True)

    @extend_schema_field(_objects())
    def get_entries(self, history: CompactionHistory) -> list[dict[str, Any]]:
        return [entry_dict(entry) for entry in history.entries]


class CommandReplyOutput(serializers.Serializer):
    """The reply to a chat command: its text, never silent."""

    text = serializers.CharField(source="reply_text", allow_null=True, allow_blank=True)
    silent = serializers.BooleanField()


class ReplyOutput(CommandReplyOutput):
    """A turn's reply (a `TurnResult`); `text` is null for a silent (NO_REPLY) answer."""

    entry_id = serializers.SerializerMethodField()
    compactions = serializers.SerializerMethodField(help_text="The ids of the compactions the turn ran.")
    scheduled = serializers.JSONField(required=False)

    def get_entry_id(self, result: TurnResult) -> str | None:
        return result.reply.entry_id if result.reply is not None else None

    def get_compactions(self, result: TurnResult) -> list[int]:
        return [run.pk for run in result.compactions]


class TurnOutput(serializers.Serializer):
    """201: the stored messages; with ``respond`` also the reply, compactions run and token figures."""

    messages = serializers.SerializerMethodField()
    reply = ReplyOutput(source="*", required=False)
    compactions = CompactionRunOutput(many=True, required=False)
    tokens = serializers.SerializerMethodField()

    @extend_schema_field(StoredMessageOutput(many=True))
    def get_messages(self, result: TurnResult) -> ReturnList[Any]:
        return stored_messages_data([result.user_message, *result.messages])

    @extend_schema_field(serializers.DictField(required=False))
    def get_tokens(self, result: TurnResult) -> SessionFigures:
        if result.final_session is not None:
            return session_figures(result.final_session, figures=result.figures)
        return session_figures(Session.objects.get(pk=result.user_message.session_id))


class CompactCommandOutput(serializers.Serializer):
    """200: a `/compact [instructions]` chat message compacted the session (the command is not stored)."""

    command = serializers.ChoiceField(choices=["compact"])
    messages = _objects()
    reply = CommandReplyOutput(source="*")
    run = CompactionRunOutput()
    tokens = serializers.DictField()
