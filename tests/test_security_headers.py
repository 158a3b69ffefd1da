"""Content-Security-Policy on every response; HSTS on HTTPS requests behind the TLS proxy."""

from __future__ import annotations

import pytest
from django.test import Client

from openclaw_site.guards.security import CONTENT_SECURITY_POLICY

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/accounts/login/", "/healthz", "/api/v1/assistants/", "/api/v1/docs/"])
def test_every_response_has_the_policy(url):
    response = Client().get(url)
    policy = response["Content-Security-Policy"]
    assert policy == CONTENT_SECURITY_POLICY
    assert (
        "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "'unsafe-eval'" not in policy
    )


def test_the_dashboard_has_no_inline_script(world):
    client = Client()
    client.force_login(world.alice)
    html = client.get("/").content.decode()
    assert "<script>" not in html and "<script src=" in html


def test_hsts_is_sent_on_https_through_the_proxy(settings):
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    secure = Client().get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert secure["Strict-Transport-Security"] == "max-age=31536000"
    plain = Client().get("/accounts/login/")
    assert "Strict-Transport-Security" not in plain
