from __future__ import annotations

from django.urls import path

urlpatterns: list = []

# Search index endpoints (memory_app/api/search_views.py).
from memory_app.api import search_views  # noqa: E402

urlpatterns += [
    path("assistants/<slug:slug>/search/", search_views.AssistantSearchView.as_view(), name="api-search"),
    path("assistants/<slug:slug>/reindex/", search_views.AssistantReindexView.as_view(), name="api-reindex"),
]
