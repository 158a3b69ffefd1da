"""``Idempotency-Key``: a retried POST gets the first response back instead of acting twice.

The record is written in the same transaction as the write it describes, so a crash can never
leave one without the other; a transaction-scoped advisory lock on (team, key) makes a second
request with the same key wait for the first and then replay it rather than append again.
Only successful responses are stored: a rejected request changed nothing, so a retry may act.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from openclaw_site.errors import ApiError
from openclaw_site.models import IdempotencyRecord, Team
from openclaw_site.platform.locks import session_lock, xact_lock

MAX_KEY_LENGTH = 200


@dataclass(frozen=True)
class StoredResponse:
    """A response to send: its status and JSON body, and whether it is a replay."""

    status: int
    body: Any
    replayed: bool = False


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    """Return a hash of what a request asks for: method, path and canonical JSON body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


def check_key(key: str | None) -> str | None:
    """Return a usable key (None when absent), or raise 400 for an empty or overlong one."""
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ApiError(
            "invalid_idempotency_key",
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters.",
            details={"field": "Idempotency-Key"},
        )
    return key


def run_idempotent(
    *, team: Team, key: str | None, fingerprint: str, action: Callable[[], StoredResponse]
) -> StoredResponse:
    """Run ``action`` once per (team, key); replay its response for the same request, 409 for another."""
    if key is None:
        return action()
    with transaction.atomic():
        xact_lock(f"idempotency:{team.pk}:{key}")
        record = IdempotencyRecord.objects.filter(team=team, key=key).first()
        if record is not None:
            return _replay(record, fingerprint)
        response = action()
        if 200 <= response.status < 300:
            IdempotencyRecord.objects.create(
                team=team,
                key=key,
                request_fingerprint=fingerprint,
                status_code=response.status,
                response_body=response.body,
            )
        return response


def _replay(record: IdempotencyRecord, fingerprint: str) -> StoredResponse:
    if record.request_fingerprint != fingerprint:
        raise ApiError(
            "idempotency_conflict",
            "This Idempotency-Key was already used for a different request; use a new key.",
            status_code=409,
            details={"idempotency_key": record.key},
        )
    return StoredResponse(status=record.status_code, body=record.response_body, replayed=True)


def run_idempotent_outside_transaction(
    *, team: Team, key: str | None, fingerprint: str, action: Callable[[], StoredResponse]
) -> StoredResponse:
    """Like `run_idempotent`, for actions that must not run inside one transaction (model calls).

    An assistant turn commits each message as it happens, so it cannot share the record's
    transaction; a session-level advisory lock on the same (team, key) serialises the requests
    instead. Every response the action returns is recorded (a failed turn has stored the user
    message, so a retry must not store it again); an action that raises recorded nothing.
    """
    if key is None:
        return action()
    with session_lock(f"idempotency:{team.pk}:{key}"):
        record = IdempotencyRecord.objects.filter(team=team, key=key).first()
        if record is not None:
            return _replay(record, fingerprint)
        response = action()
        IdempotencyRecord.objects.create(
            team=team,
            key=key,
            request_fingerprint=fingerprint,
            status_code=response.status,
            response_body=response.body,
        )
        return response
