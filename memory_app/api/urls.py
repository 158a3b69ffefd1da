from __future__ import annotations

from django.urls import path

from memory_app.api import search_views, trust_views, views

# Memory paths contain slashes (memory/2026-01-02.md); they always end in ".md", so the revisions
# route cannot be mistaken for a document.
urlpatterns = [
    path("assistants/<slug:slug>/memory/", views.MemoryListCreateApi.as_view(), name="api-memory"),
    path(
        "assistants/<slug:slug>/memory/<path:path>/revisions/",
        views.MemoryRevisionsApi.as_view(),
        name="api-memory-revisions",
    ),
    path(
        "assistants/<slug:slug>/memory/<path:path>",
        views.MemoryDocumentApi.as_view(),
        name="api-memory-document",
    ),
    # Forgetting, consolidation and review (memory_app/api/trust_views.py).
    path("assistants/<slug:slug>/forget/", trust_views.ForgetApi.as_view(), name="api-memory-forget"),
    # Search index (memory_app/api/search_views.py).
    path("assistants/<slug:slug>/search/", search_views.AssistantSearchView.as_view(), name="api-search"),
    path("assistants/<slug:slug>/reindex/", search_views.AssistantReindexView.as_view(), name="api-reindex"),
]
