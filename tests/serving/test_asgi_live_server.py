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

    from openclaw_site import asgi

    assert sys.getswitchinterval() == asgi.SWITCH_INTERVAL_SECONDS == 0.001
