from __future__ import annotations

import pytest

from sessions_app.models import Message
from tests import factories


@pytest.mark.django_db
def test_appends_assign_gap_free_seq_and_entry_ids(world):
    session = factories.make_session(world.assistant)
    rows = factories.add_messages(
        session,
        {"role": "user", "content": "hello"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "hi"}],
            "usage": {"input": 5, "output": 2},
        },
    )
    assert [r.seq for r in rows] == [1, 2]
    assert all(len(r.entry_id) == 8 for r in rows)
    assert Message.objects.filter(session=session).count() == 2


@pytest.mark.django_db
def test_pgvector_extension_is_installed():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone()[0] >= "0.8"


@pytest.mark.django_db
def test_the_embedded_server_sizes_its_buffer_cache():
    from django.conf import settings
    from django.db import connection

    from openclaw_site.platform.db import shared_buffers_mb

    if settings.DATABASE_URL or "pgdata" not in connection.settings_dict["HOST"]:
        pytest.skip("an external PostgreSQL keeps its own configuration")
    assert 128 <= shared_buffers_mb() <= 1024
    with connection.cursor() as cursor:
        cursor.execute("SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'")
        assert cursor.fetchone()[0] == shared_buffers_mb()


@pytest.fixture
def staff_client(client):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_user("ops", password="x", is_staff=True))
    return client


@pytest.mark.django_db
def test_healthz_reports_each_dependency(staff_client):
    client = staff_client
    body = client.get("/healthz").json()
    assert body["status"] == "ok"
    assert body["checks"]["database"]["ok"] and body["checks"]["database"]["pgvector"] >= "0.8"
    assert body["checks"]["broker"]["kind"] == "orm"
    assert (
        body["checks"]["model"]["configured"] is False and "LLM_BASE_URL" in body["checks"]["model"]["hint"]
    )
    deep = client.get("/healthz?deep=1").json()["checks"]["embedder"]
    assert deep["checked"] is True and deep["search_mode"] in ("hybrid", "text-only")


@pytest.mark.django_db
def test_healthz_probes_the_model_caches_the_answer_and_deep_probes_again(staff_client, llm):
    from django.core.cache import cache

    client = staff_client
    cache.clear()
    model = client.get("/healthz").json()["checks"]["model"]
    assert model["ok"] and model["probe"]["reachable"] and model["probe"]["cached"] is False
    probes = [path for path, _ in llm.requests if path.endswith("/models")]
    assert client.get("/healthz").json()["checks"]["model"]["probe"]["cached"] is True
    assert [path for path, _ in llm.requests if path.endswith("/models")] == probes  # not probed again
    assert client.get("/healthz?deep=1").json()["checks"]["model"]["probe"]["cached"] is False
    assert len([path for path, _ in llm.requests if path.endswith("/models")]) == len(probes) + 1


@pytest.mark.django_db
def test_healthz_deep_calls_the_model_only_for_staff_or_when_allowed(client, world, llm, settings):
    from django.core.cache import cache

    cache.clear()
    client.get("/healthz")  # the cached probe: one call a minute at most, whoever asks
    probes = len([path for path, _ in llm.requests if path.endswith("/models")])

    anonymous = client.get("/healthz?deep=1")
    client.force_login(world.alice)  # a team admin, not staff
    member = client.get("/healthz?deep=1")

    for refused in (anonymous, member):
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "permission_denied"
        assert "OPENCLAW_HEALTHZ_DEEP_PUBLIC" in refused.json()["error"]["message"]
    assert len([path for path, _ in llm.requests if path.endswith("/models")]) == probes
    settings.HEALTHZ_DEEP_PUBLIC = True
    client.logout()
    assert client.get("/healthz?deep=1").json()["checks"]["model"]["probe"]["cached"] is False
    assert len([path for path, _ in llm.requests if path.endswith("/models")]) == probes + 1


@pytest.mark.django_db
def test_healthz_says_degraded_when_the_model_endpoint_is_down(staff_client, llm):
    from django.core.cache import cache

    client = staff_client
    cache.clear()
    llm.stop()  # the endpoint goes away
    response = client.get("/healthz?deep=1")
    body = response.json()
    assert response.status_code == 200 and body["status"] == "degraded"
    assert body["checks"]["model"]["ok"] is False and body["checks"]["model"]["probe"]["error"]
