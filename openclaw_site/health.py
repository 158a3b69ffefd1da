"""GET /healthz: database, broker, embedder and model status."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from providers.chat import get_chat_model
from providers.embeddings import embedder_status


def _database() -> dict[str, Any]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        return {"ok": True, "pgvector": row[0] if row else None, "embedded": not settings.DATABASE_URL}
    except Exception as error:  # health must report, never raise
        return {"ok": False, "error": str(error)}


def _broker() -> dict[str, Any]:
    if settings.REDIS_URL:
        try:
            import redis

            redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
            return {"ok": True, "kind": "redis"}
        except Exception as error:
            return {"ok": False, "kind": "redis", "error": str(error)}
    return {"ok": True, "kind": "orm", "sync": settings.TASKS_SYNC}


def _model() -> dict[str, Any]:
    chat = get_chat_model("chat")
    configured = chat is not None
    return {
        "ok": True,
        "configured": configured,
        "model": chat.name if chat is not None else None,
        "offline": not configured,
        "hint": None
        if configured
        else "Set LLM_BASE_URL, LLM_API_KEY and LLM_MODEL to let assistants reply.",
    }


def _embedder(*, load: bool) -> dict[str, Any]:
    status = embedder_status(load=load)
    # No embedder is a supported mode (text-only search), so it is reported, not failed.
    return {"ok": True, "setting": settings.EMBEDDING_PROVIDER, "search_mode": _search_mode(status), **status}


def _search_mode(status: dict[str, Any]) -> str:
    if status["preloading"]:
        return "loading the embedder (started with the process)"
    if not status["checked"]:
        return "unknown until first use (add ?deep=1 to load the embedder now)"
    return "hybrid" if status["loaded"] else "text-only"


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Report each dependency; 503 when the database or the broker is down."""
    deep = request.GET.get("deep") in ("1", "true")
    checks = {
        "database": _database(),
        "broker": _broker(),
        "embedder": _embedder(load=deep),
        "model": _model(),
    }
    ok = checks["database"]["ok"] and checks["broker"]["ok"]
    return JsonResponse({"status": "ok" if ok else "degraded", "checks": checks}, status=200 if ok else 503)
