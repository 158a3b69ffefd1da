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
    path(
        "assistants/<slug:slug>/consolidate/",
        trust_views.ConsolidateApi.as_view(),
        name="api-memory-consolidate",
    ),
    path("assistants/<slug:slug>/proposals/", trust_views.ProposalListApi.as_view(), name="api-proposals"),
    path(
        "proposals/<int:pk>/approve/", trust_views.ProposalApproveApi.as_view(), name="api-proposal-approve"
    ),
    path("proposals/<int:pk>/reject/", trust_views.ProposalRejectApi.as_view(), name="api-proposal-reject"),
    # Search index (memory_app/api/search_views.py).
    path("assistants/<slug:slug>/search/", search_views.AssistantSearchView.as_view(), name="api-search"),
    path("assistants/<slug:slug>/index/", search_views.AssistantIndexView.as_view(), name="api-index"),
    path("assistants/<slug:slug>/reindex/", search_views.AssistantReindexView.as_view(), name="api-reindex"),
]
