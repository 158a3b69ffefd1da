"""Long-term memory: Markdown documents per assistant and every revision of them."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models

from openclaw_site.models import Assistant


def content_hash(content: str) -> str:
    """Return the SHA-256 of a document's text (OpenClaw's file-record hash, reference 4.2)."""
    return hashlib.sha256(content.encode()).hexdigest()


class MemoryDocument(models.Model):
    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="memory_documents")
    path = models.CharField(max_length=255)
    content = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["assistant", "path"]
        constraints = [models.UniqueConstraint(fields=["assistant", "path"], name="memory_document_path_unique")]

    def __str__(self) -> str:
        return f"{self.assistant}:{self.path}"

    @property
    def line_count(self) -> int:
        return len(self.content.splitlines())


class Author(models.TextChoices):
    USER = "user"
    ADMIN = "admin"
    AGENT = "agent"
    FLUSH = "flush"
    IMPORT = "import"


class RevisionAction(models.TextChoices):
    CREATE = "create"
    UPDATE = "update"
    APPEND = "append"
    DELETE = "delete"
    REVERT = "revert"


class MemoryRevision(models.Model):
    """Who wrote what, and from which message. Kept when the document is deleted (no data is lost).

    ``session_pk``/``message_pk`` point at sessions_app rows without a foreign key: memory_app is the
    lower layer and knows nothing about sessions (style.md).
    """

    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="memory_revisions")
    document = models.ForeignKey(
        MemoryDocument, null=True, blank=True, on_delete=models.SET_NULL, related_name="revisions"
    )
    path = models.CharField(max_length=255)
    content = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64)
    action = models.CharField(max_length=16, choices=RevisionAction.choices)
    author = models.CharField(max_length=16, choices=Author.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    session_pk = models.BigIntegerField(null=True, blank=True)
    message_pk = models.BigIntegerField(null=True, blank=True)
    note = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(author__in=Author.values), name="revision_author_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.path} {self.action} by {self.author} at {self.created_at:%Y-%m-%d %H:%M}"
