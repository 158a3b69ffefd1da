"""URL routes of the dashboard's memory pages: documents, revisions, the review queue, search."""

from __future__ import annotations

from django.urls import path

from memory_app.web import review
from memory_app.web import views as memory

urlpatterns = [
    # Memory: the action comes before the document path, which may contain slashes.
    path("assistants/<slug:slug>/memory/", memory.memory_index, name="memory"),
    path("assistants/<slug:slug>/memory/new/", memory.memory_new, name="memory-new"),
    path("assistants/<slug:slug>/memory/deleted/", memory.memory_deleted, name="memory-deleted"),
    path("assistants/<slug:slug>/memory/reindex/", memory.memory_reindex, name="memory-reindex"),
    path("assistants/<slug:slug>/memory/review/", review.memory_review, name="memory-review"),
    path("review/", review.team_review, name="team-review"),
    path("review/decide/", review.team_review_decide, name="team-review-decide"),
    path(
        "assistants/<slug:slug>/memory/review/decide/",
        review.memory_review_decide,
        name="memory-review-decide",
    ),
    path("assistants/<slug:slug>/memory/consolidate/", review.memory_consolidate, name="memory-consolidate"),
    path("assistants/<slug:slug>/memory/doc/<path:path>", memory.memory_document, name="memory-document"),
    path(
        "assistants/<slug:slug>/memory/id/<int:pk>/", memory.memory_document_by_id, name="memory-document-id"
    ),
    path("assistants/<slug:slug>/memory/edit/<path:path>", memory.memory_edit, name="memory-edit"),
    path("assistants/<slug:slug>/memory/delete/<path:path>", memory.memory_delete, name="memory-delete"),
    path("assistants/<slug:slug>/memory/rename/<path:path>", memory.memory_rename, name="memory-rename"),
    path(
        "assistants/<slug:slug>/memory/status/<path:path>",
        memory.memory_index_status,
        name="memory-index-status",
    ),
    path("assistants/<slug:slug>/memory/revisions/<int:pk>/", memory.memory_revision, name="memory-revision"),
    path(
        "assistants/<slug:slug>/memory/revisions/<int:pk>/revert/", memory.memory_revert, name="memory-revert"
    ),
    path("assistants/<slug:slug>/search/", memory.search, name="search"),
]
