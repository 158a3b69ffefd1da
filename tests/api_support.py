"""Helpers shared by the API tests: login clients, error assertions, and a snapshot of what exists."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.test import APIClient

from memory_app.models import MemoryDocument, MemoryRevision
from openclaw_site.models import ApiKey, Assistant, IdempotencyRecord, Team
from sessions_app.models import CompactionEntry, Message, Session

API = "/api/v1"


def login_client(user: Any, *, team: Team | None = None) -> APIClient:
    """A browser-session client signed in as ``user`` (optionally acting for ``team`` via X-Team)."""
    client = APIClient()
    client.force_login(user)
    if team is not None:
        client.credentials(HTTP_X_TEAM=team.slug)
    return client


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """Assert an error response in our shape and return its ``error`` object."""
    assert response.status_code == status, (response.status_code, getattr(response, "content", b"")[:500])
    body = json.loads(response.content)
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details"}, error
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    return error


def snapshot() -> dict[str, Any]:
    """Counts and fingerprints of every table an API write could change."""
    return {
        "assistants": sorted(Assistant.objects.values_list("team__slug", "slug", "name", "updated_at")),
        "sessions": sorted(Session.objects.values_list("pk", "title", "last_seq")),
        "messages": Message.objects.count(),
        "compactions": CompactionEntry.objects.count(),
        "documents": sorted(MemoryDocument.objects.values_list("pk", "content_hash")),
        "revisions": MemoryRevision.objects.count(),
        "keys": sorted(ApiKey.objects.values_list("pk", "revoked_at")),
        "idempotency": IdempotencyRecord.objects.count(),
    }


def post_json(client: APIClient, url: str, body: Any, **extra: Any) -> Any:
    return client.post(url, data=json.dumps(body), content_type="application/json", **extra)
