"""Django admin for memory: documents are edited through memory_app.documents, revisions are read-only.

A save or delete here goes through `write_document`/`delete_document` with author "admin", so it
leaves a revision and triggers the reindex and the export like any other write (docs/design.md, How a message flows).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from memory_app.documents import Provenance, delete_document, write_document
from memory_app.models import Author, MemoryDocument, MemoryRevision
from memory_app.paths import InvalidPath, validate_memory_path
from openclaw_site.admin import ReadOnlyAdmin


class MemoryDocumentForm(forms.ModelForm):
    content = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 30, "cols": 110, "style": "font-family: monospace"}),
    )
    # The hash the editor started from: a save over someone else's newer write is refused.
    base_hash = forms.CharField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = MemoryDocument
        fields = ["assistant", "path", "content"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["base_hash"].initial = self.instance.content_hash

    def clean_path(self) -> str:
        try:
            return validate_memory_path(self.cleaned_data.get("path"))
        except InvalidPath as error:
            raise forms.ValidationError(f"Invalid memory path: {error}.") from None

    def clean_content(self) -> str:
        # Browsers submit textareas with CRLF line endings; memory files use LF like OpenClaw's.
        content = self.cleaned_data.get("content", "").replace("\r\n", "\n")
        if len(content.encode()) > settings.MAX_MEMORY_DOCUMENT_BYTES:
            raise forms.ValidationError(
                f"The document is larger than {settings.MAX_MEMORY_DOCUMENT_BYTES} bytes."
            )
        return content

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        base = cleaned.get("base_hash")
        if self.instance.pk and base:
            current = (
                MemoryDocument.objects.filter(pk=self.instance.pk)
                .values_list("content_hash", flat=True)
                .first()
            )
            if current is not None and current != base:
                raise forms.ValidationError(
                    "This document changed since you opened it; reload the page and "
                    "apply your edit again (the other version is in its revisions)."
                )
        return cleaned


_REVISION_FIELDS = (
    "created_at",
    "action",
    "author",
    "user",
    "session_pk",
    "message_pk",
    "note",
    "content_hash",
)


class RevisionInline(admin.TabularInline):
    model = MemoryRevision
    fk_name = "document"
    extra = 0
    can_delete = False
    show_change_link = True
    fields = _REVISION_FIELDS
    readonly_fields = _REVISION_FIELDS
    ordering = ["-created_at", "-id"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(MemoryDocument)
class MemoryDocumentAdmin(admin.ModelAdmin):
    form = MemoryDocumentForm
    list_display = ["path", "assistant", "content_hash", "updated_at"]
    list_filter = ["assistant__team", "assistant"]
    search_fields = ["path", "content"]
    list_select_related = ["assistant", "assistant__team"]
    inlines = [RevisionInline]

    def get_readonly_fields(self, request: HttpRequest, obj: MemoryDocument | None = None) -> list[str]:
        # A document's identity is fixed; renaming is a new document plus a delete.
        return ["assistant", "path", "content_hash", "created_at", "updated_at"] if obj else []

    def save_model(
        self, request: HttpRequest, obj: MemoryDocument, form: forms.ModelForm, change: bool
    ) -> None:
        document, _ = write_document(
            assistant=obj.assistant,
            path=obj.path,
            content=obj.content,
            provenance=Provenance(author=Author.ADMIN, user=request.user),
        )
        # The admin goes on to log and redirect with ``obj``: give it the saved row's identity.
        obj.pk, obj.content_hash = document.pk, document.content_hash
        obj.created_at, obj.updated_at = document.created_at, document.updated_at
        obj._state.adding = False

    def delete_model(self, request: HttpRequest, obj: MemoryDocument) -> None:
        delete_document(document=obj, provenance=Provenance(author=Author.ADMIN, user=request.user))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MemoryDocument]) -> None:
        for document in queryset:
            self.delete_model(request, document)


@admin.register(MemoryRevision)
class MemoryRevisionAdmin(ReadOnlyAdmin):
    list_display = ["path", "assistant", "action", "author", "user", "session_pk", "created_at"]
    list_filter = ["author", "action", "assistant__team", "assistant"]
    search_fields = ["path", "note", "content_hash"]
    list_select_related = ["assistant", "assistant__team", "user"]
    date_hierarchy = "created_at"
