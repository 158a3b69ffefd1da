"""URL routes: the REST API under /api/v1/, the OpenAI-compatible /v1/, health, admin, and the htmx dashboard."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from openclaw_site.platform import health

api_v1: list[URLPattern | URLResolver] = [
    path("", include("openclaw_site.api.urls")),
    path("", include("memory_app.api.urls")),
    path("", include("sessions_app.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("api/v1/", include(api_v1)),
    path("v1/", include("integrations.openai_urls")),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("openclaw_site.web.urls")),
    path("", include("memory_app.web.urls")),
    path("", include("sessions_app.web.urls")),
]
# DEBUG only (empty otherwise): uvicorn, unlike runserver, serves no static files itself.
urlpatterns += staticfiles_urlpatterns()
