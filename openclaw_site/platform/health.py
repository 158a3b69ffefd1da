"""GET /healthz: database, broker, embedder and model status.

The model is probed (``GET <LLM_BASE_URL>/models``, a few seconds at most) and the answer cached
for `MODEL_PROBE_TTL_SECONDS`, so a load balancer polling /healthz does not call the model each
time; ``?deep=1`` probes now and loads the embedder, for a signed-in staff user only unless
`OPENCLAW_HEALTHZ_DEEP_PUBLIC` is set: anyone else would spend the server's model key at will
(docs/design.md, REST API).
"""

from __future__ import annotations

import time
from typing import NotRequired, TypedDict

import openai
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from openclaw_site.errors import error_body
from providers.chat import get_chat_model
from providers.embeddings import EmbedderStatus, embedder_status
from providers.errors import provider_error_from
from providers.openai_client import make_openai_client

MODEL_PROBE_TTL_SECONDS = 60
MODEL_PROBE_TIMEOUT_SECONDS = 3.0
# An endpoint without a model list still answered: it is up.
_REACHABLE_STATUSES = (404, 405)


class DatabaseCheck(TypedDict):
    ok: bool
    pgvector: NotRequired[str | None]
    embedded: NotRequired[bool]
    error: NotRequired[str]


class BrokerCheck(TypedDict):
    ok: bool
    kind: str
    sync: NotRequired[bool]
    error: NotRequired[str]


class ModelProbe(TypedDict):
    """One probe of the model endpoint (cached for MODEL_PROBE_TTL_SECONDS)."""

    reachable: bool
    error: str | None
    latency_ms: int
    checked_at: float
    cached: NotRequired[bool]
    age_seconds: NotRequired[float]


class ModelCheck(TypedDict):
    ok: bool
    configured: bool
    model: str | None
    offline: bool
    hint: NotRequired[str]
    probe: NotRequired[ModelProbe]


class EmbedderCheck(EmbedderStatus):
    ok: bool
    setting: str
    search_mode: str


class Checks(TypedDict):
    database: DatabaseCheck
    broker: BrokerCheck
    embedder: EmbedderCheck
    model: ModelCheck


def _database() -> DatabaseCheck:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        return {"ok": True, "pgvector": row[0] if row else None, "embedded": not settings.DATABASE_URL}
    except Exception as error:  # health must report, never raise
        return {"ok": False, "error": str(error)}


def _broker() -> BrokerCheck:
    if settings.REDIS_URL:
        try:
            import redis

            redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
            return {"ok": True, "kind": "redis"}
        except Exception as error:
            return {"ok": False, "kind": "redis", "error": str(error)}
    return {"ok": True, "kind": "orm", "sync": settings.TASKS_SYNC}


def _model(*, probe_now: bool) -> ModelCheck:
    chat = get_chat_model("chat")
    if chat is None:
        return {
            "ok": True,  # offline is a supported mode (the offline summariser and extractor)
            "configured": False,
            "model": None,
            "offline": True,
            "hint": "Set LLM_BASE_URL, LLM_API_KEY and LLM_MODEL to let assistants reply.",
        }
    probe = _probe_model(force=probe_now)
    return {
        "ok": probe["reachable"],
        "configured": True,
        "model": chat.name,
        "offline": False,
        "probe": probe,
    }


def _probe_model(*, force: bool) -> ModelProbe:
    """Return the cached probe of the model endpoint, probing when it is missing, stale or forced."""
    key = f"healthz:model-probe:{settings.LLM_BASE_URL}"
    cached = None if force else cache.get(key)
    if cached is not None:
        probe: ModelProbe = cached
        return {**probe, "cached": True, "age_seconds": round(time.time() - probe["checked_at"], 1)}
    result = _probe_endpoint()
    cache.set(key, result, timeout=MODEL_PROBE_TTL_SECONDS)
    return {**result, "cached": False, "age_seconds": 0.0}


def _probe_endpoint() -> ModelProbe:
    client = make_openai_client(
        base_url=settings.LLM_BASE_URL,
        api_key=settings.LLM_API_KEY,
        timeout_seconds=MODEL_PROBE_TIMEOUT_SECONDS,
    )
    started = time.monotonic()
    try:
        client.models.list()
        reachable, error = True, None
    except openai.APIStatusError as exc:
        reachable = exc.status_code in _REACHABLE_STATUSES
        error = None if reachable else f"HTTP {exc.status_code}: {provider_error_from(exc).message}"
    except openai.OpenAIError as exc:
        reachable, error = False, provider_error_from(exc).message
    return {
        "reachable": reachable,
        "error": error,
        "latency_ms": round((time.monotonic() - started) * 1000),
        "checked_at": time.time(),
    }


def _embedder(*, load: bool) -> EmbedderCheck:
    status = embedder_status(load=load)
    # No embedder is a supported mode (text-only search), so it is reported, not failed.
    return {"ok": True, "setting": settings.EMBEDDING_PROVIDER, "search_mode": _search_mode(status), **status}


def _search_mode(status: EmbedderStatus) -> str:
    if status["preloading"]:
        return "loading the embedder (started with the process)"
    if not status["checked"]:
        return "unknown until first use (add ?deep=1 to load the embedder now)"
    return "hybrid" if status["loaded"] else "text-only"


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Report each dependency; 503 when the database or the broker is down; ?deep=1 loads and probes now."""
    deep = request.GET.get("deep") in ("1", "true")
    if deep and not (settings.HEALTHZ_DEEP_PUBLIC or request.user.is_staff):
        message = (
            "?deep=1 calls the model provider now: sign in as a staff user, or set "
            "OPENCLAW_HEALTHZ_DEEP_PUBLIC=true. /healthz without it reports the cached probe."
        )
        return JsonResponse(error_body("permission_denied", message), status=403)
    checks: Checks = {
        "database": _database(),
        "broker": _broker(),
        "embedder": _embedder(load=deep),
        "model": _model(probe_now=deep),
    }
    # Without the database or the broker nothing works (503); without the model, memory and
    # search still do: "degraded", but the server is up.
    up = checks["database"]["ok"] and checks["broker"]["ok"]
    status = "ok" if up and checks["model"]["ok"] else "degraded"
    return JsonResponse({"status": status, "checks": checks}, status=200 if up else 503)
