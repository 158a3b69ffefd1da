"""drf-spectacular extensions: document our Bearer API keys in the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "openclaw_site.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "ocs_<prefix>_<secret>",
            "description": "A team API key; scopes: sessions:read, sessions:write, memory:read, memory:write, admin.",
        }
