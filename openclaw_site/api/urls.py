from __future__ import annotations

from django.urls import path

from openclaw_site.api import views

urlpatterns = [
    path("assistants/", views.AssistantListCreateApi.as_view(), name="api-assistants"),
    path("assistants/<slug:slug>/", views.AssistantDetailApi.as_view(), name="api-assistant"),
    path("api-keys/", views.ApiKeyListCreateApi.as_view(), name="api-keys"),
    path("api-keys/<int:key_id>/", views.ApiKeyRevokeApi.as_view(), name="api-key"),
    path("tasks/<str:task_id>/", views.TaskDetailApi.as_view(), name="api-task"),
    path("usage/", views.UsageApi.as_view(), name="api-usage"),
]
