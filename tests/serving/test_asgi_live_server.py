"""The ASGI application answers under uvicorn, on the test database."""

from __future__ import annotations

import httpx2 as httpx


def test_asgi_application_serves_health_and_api_on_the_test_database(asgi_live_server, world, acme_secret):
    health = httpx.get(f"{asgi_live_server.url}/healthz", timeout=10)
    assert health.status_code == 200

    assistants = httpx.get(
        f"{asgi_live_server.url}/api/v1/assistants/",
        headers={"Authorization": f"Bearer {acme_secret}"},
        timeout=10,
    )
    assert assistants.status_code == 200
    assert [row["slug"] for row in assistants.json()["assistants"]] == ["helper"]


def test_the_asgi_process_hands_the_interpreter_lock_on_every_millisecond():
    import sys

    from config import asgi

    assert sys.getswitchinterval() == asgi.SWITCH_INTERVAL_SECONDS == 0.001


def test_django_handles_a_whole_request_in_one_request_thread(asgi_live_server, world, acme_secret):
    """Started, handled and finished in one thread of the request pool (openclaw_site/platform/asgi_handler.py)."""
    import threading

    from django.core.signals import request_finished, request_started

    seen: list[tuple[str, str]] = []

    def started(**kwargs: object) -> None:
        seen.append(("started", threading.current_thread().name))

    def finished(**kwargs: object) -> None:
        seen.append(("finished", threading.current_thread().name))

    request_started.connect(started)
    request_finished.connect(finished)
    try:
        answer = httpx.get(
            f"{asgi_live_server.url}/api/v1/assistants/",
            headers={"Authorization": f"Bearer {acme_secret}"},
            timeout=10,
        )
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)

    assert answer.status_code == 200
    assert [event for event, _ in seen] == ["started", "finished"]
    assert seen[0][1] == seen[1][1] and seen[0][1].startswith("request")
