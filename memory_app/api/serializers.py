"""Input and output shapes of the memory document endpoints."""

from __future__ import annotations

from rest_framework import serializers

from openclaw_site.api.base import StrictCharField, StrictSerializer


class DocumentCreateInput(StrictSerializer):
    path = StrictCharField(
        max_length=1000, allow_blank=True, help_text="MEMORY.md, memory.md or memory/**/*.md"
    )
    content = StrictCharField(allow_blank=True, trim_whitespace=False)


class DocumentPutInput(StrictSerializer):
    content = StrictCharField(allow_blank=True, trim_whitespace=False)
    expected_hash = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=64,
        help_text="The content_hash you read; the write is refused (409 stale_write) if it changed since. "
        "An empty string means 'the document must not exist yet'.",
    )


class DocumentSummaryOutput(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField(help_text="UTF-8 bytes")
    lines = serializers.IntegerField()
    content_hash = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


PROVENANCE_HELP = (
    "With ?provenance=true: one entry per line, {line, text, origin: {kind, revision, author, user, "
    "api_key, session, message, import, proposal, note}, trust: owner|agent|untrusted, at}."
)


class DocumentOutput(DocumentSummaryOutput):
    content = serializers.CharField()
    provenance = serializers.ListField(
        child=serializers.DictField(), required=False, help_text=PROVENANCE_HELP
    )


class DocumentWriteOutput(DocumentOutput):
    revision = serializers.IntegerField(
        allow_null=True, help_text="The new revision; null if nothing changed."
    )


class LineRangeOutput(serializers.Serializer):
    path = serializers.CharField()
    text = serializers.CharField()
    # "from" is a Python keyword: declared below.
    lines = serializers.IntegerField(help_text="How many lines were returned.")
    total_lines = serializers.IntegerField()
    content_hash = serializers.CharField()
    updated_at = serializers.DateTimeField()
    provenance = serializers.ListField(
        child=serializers.DictField(), required=False, help_text=PROVENANCE_HELP
    )


LineRangeOutput._declared_fields["from"] = serializers.IntegerField(
    help_text="The first line returned (1-based)."
)


class RevisionOutput(serializers.Serializer):
    id = serializers.IntegerField()
    path = serializers.CharField()
    action = serializers.CharField()
    author = serializers.CharField(help_text="user, admin, agent, flush or import")
    user = serializers.CharField(allow_null=True)
    session_pk = serializers.IntegerField(allow_null=True)
    message_pk = serializers.IntegerField(allow_null=True)
    note = serializers.CharField(allow_blank=True)
    content_hash = serializers.CharField()
    size = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    content = serializers.CharField(required=False, help_text="With ?include_content=1.")
