"""Input and output shapes of the memory document endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework import serializers

from memory_app.models import MemoryDocument, MemoryRevision
from openclaw_site.api.base import StrictCharField, StrictSerializer


def count_lines(content: str) -> int:
    """Return the number of lines, a final newline not starting another (matches `with_stats`)."""
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)


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
    """A memory document without its text; size and lines from `with_stats` when annotated."""

    path = serializers.CharField()
    size = serializers.SerializerMethodField(help_text="UTF-8 bytes")
    lines = serializers.SerializerMethodField()
    content_hash = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_size(self, document: MemoryDocument) -> int:
        size = getattr(document, "size", None)
        return size if size is not None else len(document.content.encode())

    def get_lines(self, document: MemoryDocument) -> int:
        lines = getattr(document, "lines", None)
        return lines if lines is not None else count_lines(document.content)


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
    # The revision comes in the serializer's context: a document does not hold the one just written.
    revision = serializers.SerializerMethodField(help_text="The new revision; null if nothing changed.")

    def get_revision(self, document: MemoryDocument) -> int | None:
        revision: MemoryRevision | None = self.context["revision"]
        return revision.pk if revision is not None else None


@dataclass(frozen=True)
class LineRange:
    """A line window of a document (`memory_app.documents.read_lines`)."""

    document: MemoryDocument
    text: str
    first: int
    lines: int
    total_lines: int


class LineRangeOutput(serializers.Serializer):
    """A `LineRange`."""

    path = serializers.CharField(source="document.path")
    text = serializers.CharField(allow_blank=True, trim_whitespace=False)
    # "from" is a Python keyword: declared below.
    lines = serializers.IntegerField(help_text="How many lines were returned.")
    total_lines = serializers.IntegerField()
    content_hash = serializers.CharField(source="document.content_hash")
    updated_at = serializers.DateTimeField(source="document.updated_at")
    provenance = serializers.ListField(
        child=serializers.DictField(), required=False, help_text=PROVENANCE_HELP
    )


LineRangeOutput._declared_fields["from"] = serializers.IntegerField(
    source="first", help_text="The first line returned (1-based)."
)


class RevisionOutput(serializers.Serializer):
    """A revision annotated with its content's ``size``; ``content`` with ``include_content``."""

    id = serializers.IntegerField(source="pk")
    path = serializers.CharField()
    action = serializers.CharField()
    author = serializers.CharField(help_text="user, admin, agent, flush or import")
    user = serializers.SerializerMethodField()
    session_pk = serializers.IntegerField(allow_null=True)
    message_pk = serializers.IntegerField(allow_null=True)
    note = serializers.CharField(allow_blank=True)
    content_hash = serializers.CharField()
    size = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    content = serializers.CharField(required=False, help_text="With ?include_content=1.")

    def __init__(self, *args: Any, include_content: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not include_content:
            self.fields.pop("content")

    def get_user(self, revision: MemoryRevision) -> str | None:
        return revision.user.get_username() if revision.user else None
