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
