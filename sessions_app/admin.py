"""Django admin for sessions: transcripts and compaction history are read-only records."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from openclaw_site.admin import ReadOnlyAdmin
from sessions_app.messages import text_of
from sessions_app.models import CompactionEntry, CompactionRun, Message, Session


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = [
        "key",
        "assistant",
        "title",
        "last_seq",
        "total_tokens",
        "compaction_count",
        "memory_flush_compaction_count",
        "updated_at",
        "transcript",
    ]
    list_filter = ["assistant__team", "assistant"]
    search_fields = ["key", "title", "session_uuid"]
    list_select_related = ["assistant", "assistant__team"]
    date_hierarchy = "updated_at"

    @admin.display(description="transcript")
    def transcript(self, session: Session) -> str:
        url = reverse("admin:sessions_app_message_changelist") + f"?session__id__exact={session.pk}"
        return format_html('<a href="{}">messages</a>', url)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = [
        "session",
        "seq",
        "role",
        "preview",
        "tool_name",
        "silent",
        "estimated_tokens",
        "created_at",
    ]
    list_filter = ["role", "silent", "is_error", "session__assistant__team", "session__assistant"]
    search_fields = ["entry_id", "tool_name", "tool_call_id", "session__key", "content"]
    list_select_related = ["session", "session__assistant", "session__assistant__team"]
    ordering = ["-created_at", "-id"]

    @admin.display(description="content")
    def preview(self, message: Message) -> str:
        text = text_of(message.content)
        return text if len(text) <= 120 else f"{text[:117]}..."


@admin.register(CompactionEntry)
class CompactionEntryAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "trigger", "tokens_before", "tokens_after", "offline", "created_at"]
    list_filter = ["trigger", "offline", "session__assistant__team", "session__assistant"]
    search_fields = ["summary", "entry_id", "session__key"]
    list_select_related = ["session", "session__assistant", "session__assistant__team"]


@admin.register(CompactionRun)
class CompactionRunAdmin(ReadOnlyAdmin):
    list_display = [
        "session",
        "trigger",
        "state",
        "flush_outcome",
        "tokens_before",
        "tokens_after",
        "offline",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state", "trigger", "offline", "session__assistant__team", "session__assistant"]
    search_fields = ["reason", "instructions", "session__key"]
    list_select_related = ["session", "session__assistant", "session__assistant__team"]
