"""drf-spectacular extensions: document our Bearer API keys in the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "openclaw_site.guards.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "ocs_<prefix>_<secret>",
            "description": "A team API key; scopes: sessions:read, sessions:write, memory:read, memory:write, admin.",
        }


# --- every response documented (a drf-spectacular postprocessing hook) -------------------------

ERROR_COMPONENT = "Error"
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The one error envelope (openclaw_site/errors.py); docs/design.md lists the codes.",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string", "description": "Stable machine-readable code, e.g. not_found."},
                "message": {"type": "string", "description": "What happened and what to do, for a human."},
                "details": {
                    "type": "object",
                    "additionalProperties": True,
                    "description": "Context such as `field`, `required_scope`, or what a failed turn stored.",
                },
            },
        }
    },
}
RETRY_AFTER = {
    "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before retrying."}
}
# Every operation can answer these (bad parameters, authentication, scopes, another team's object,
# the size limit, the rate limit, a database outage, a bug).
COMMON_ERRORS = {
    "400": "Invalid input: malformed JSON, an unknown or badly typed field or parameter, unstorable text.",
    "401": "Missing, malformed, revoked or expired credentials.",
    "403": "The key lacks the scope, or the user is in no team.",
    "404": "Not found (also another team's object).",
    "405": "Method not allowed.",
    "409": "conflict_retry: another request changed the same data at the same moment; send it again.",
    "406": "The Accept header asks for something other than JSON.",
    "413": "The request body is over OPENCLAW_MAX_REQUEST_BYTES.",
    "429": "rate_limited: too many requests with this API key; team_busy (searches): the team runs its share at once.",
    "500": "Server error.",
    "503": "The database is unavailable (database_unavailable), or no model is configured for a turn.",
}
BODY_ERRORS = {"415": "The body is not application/json."}
OPERATION_ERRORS: dict[str, dict[str, str]] = {
    "assistants_create": {"409": "assistant_exists"},
    "memory_create": {"409": "document_exists"},
    "memory_put": {"409": "stale_write"},
    "sessions_create": {"409": "session_exists"},
    "messages_create": {
        "409": "idempotency_conflict, turn_in_progress, compaction_in_progress, already_compacted",
        "422": "context_overflow after the compaction attempts, or nothing_to_compact for /compact",
        "502": "model_error or compaction_failed (the error lists what was stored)",
        "504": "model_timeout (the user message is stored)",
    },
    "sessions_compact": {
        "409": "compaction_in_progress or already_compacted",
        "410": "session_deleted: the session was deleted while it was being compacted",
        "422": "nothing_to_compact",
        "502": "compaction_failed: says what, if anything, the memory flush before it wrote",
    },
}
MAX_DATABASE_INTEGER = 2**63 - 1
PATH_PARAMETER_SCHEMAS: dict[str, dict[str, Any]] = {
    "session_id": {"type": "integer", "minimum": 0, "maximum": MAX_DATABASE_INTEGER},
    "key_id": {"type": "integer", "minimum": 0, "maximum": MAX_DATABASE_INTEGER},
    "slug": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
    "task_id": {"type": "string", "pattern": "^[^/]+$"},
    "path": {"type": "string", "pattern": "^.+$", "description": "MEMORY.md, memory.md or memory/<name>.md"},
}


# The bounds `openclaw_site.api.base.query_int` enforces for the integer query parameters.
QUERY_INT_MAX = 2**53 - 1
QUERY_PARAMETER_SCHEMAS: dict[str, dict[str, Any]] = {
    "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
    "offset": {"type": "integer", "minimum": 0, "maximum": QUERY_INT_MAX},
    "after_seq": {"type": "integer", "minimum": 0, "maximum": QUERY_INT_MAX},
    "from": {"type": "integer", "minimum": 1, "maximum": QUERY_INT_MAX},
    "lines": {"type": "integer", "minimum": 1, "maximum": QUERY_INT_MAX},
}


def document_every_response(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Add the error envelope and every error status each operation can answer, and path patterns."""
    result.setdefault("components", {}).setdefault("schemas", {})[ERROR_COMPONENT] = ERROR_SCHEMA
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            errors = dict(COMMON_ERRORS)
            if method in ("post", "put", "patch"):
                errors.update(BODY_ERRORS)
            errors.update(OPERATION_ERRORS.get(operation.get("operationId", ""), {}))
            for status, description in errors.items():
                operation["responses"].setdefault(status, _error_response(status, description))
            for parameter in operation.get("parameters", []):
                table = {"path": PATH_PARAMETER_SCHEMAS, "query": QUERY_PARAMETER_SCHEMAS}.get(
                    parameter.get("in"), {}
                )
                if parameter["name"] in table:
                    parameter["schema"] = dict(table[parameter["name"]])
    return result


def _error_response(status: str, description: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}}},
    }
    if status in ("429", "503"):
        response["headers"] = RETRY_AFTER
    return response
