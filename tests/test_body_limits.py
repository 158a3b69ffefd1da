"""Size and authentication before the body, on every surface (docs/design.md, Limits and refusals).

Against the live ASGI server (what production runs) the requests are written on a raw socket, so a
test can send the headers alone and show that the answer came without a byte of the body; under
WSGI (Django's test client) the body is a stream that fails the test if anything reads it.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai
import pytest
from django.utils import timezone
from mcp.shared.exceptions import MCPError

from openclaw_site.guards.body_limits import PREAUTH_BODY_BYTES
from tests import factories
from tests.mcp_client import call_tool, mcp_url

GIB = 1 << 30
JSON = {"Content-Type": "application/json"}


def raw_exchange(base_url: str, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> Any:
    """Send the request line, ``headers`` and ``body`` (often none of the body announced), then read the answer."""
    parts = urlsplit(base_url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    try:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {parts.hostname}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        response.body = response.read()  # type: ignore[attr-defined]
        return response
    finally:
        sock.close()


def chunked(payload: bytes, piece: int = 16 * 1024) -> bytes:
    """``payload`` in chunked transfer coding, without the closing chunk (the sender never finishes)."""
    return b"".join(
        b"%x\r\n%s\r\n" % (len(payload[i : i + piece]), payload[i : i + piece])
        for i in range(0, len(payload), piece)
    )


def mcp_error(call: Callable[[], Any]) -> MCPError:
    """The MCPError the official client raised (inside the task group's exception group)."""
    with pytest.raises(BaseExceptionGroup) as raised:
        call()
    group = raised.value.subgroup(MCPError)
    assert group is not None, raised.value
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    assert isinstance(group, MCPError)
    return group


def envelope(response: Any) -> dict[str, Any]:
    return json.loads(response.body)["error"]


# --- REST under ASGI -----------------------------------------------------------------------------


def test_a_huge_declared_body_is_refused_at_once_before_any_of_it_is_sent(asgi_live_server, world):
    response = raw_exchange(
        asgi_live_server.url, "POST", "/api/v1/assistants/", {**JSON, "Content-Length": str(GIB)}
    )

    assert response.status == 413
    error = envelope(response)
    assert error["code"] == "payload_too_large"
    assert error["details"] == {"limit": 5_000_000, "size": GIB}
    assert response.getheader("Connection") == "close"


def test_an_unauthenticated_body_is_refused_before_it_is_read(asgi_live_server, world):
    # 4 MB announced (under the limit), none of it sent: the 401 comes without waiting for it.
    response = raw_exchange(
        asgi_live_server.url, "POST", "/api/v1/assistants/", {**JSON, "Content-Length": "4000000"}
    )

    assert response.status == 401
    assert envelope(response)["code"] == "not_authenticated"
    assert response.getheader("WWW-Authenticate", "").startswith("Bearer")


def test_a_bad_key_with_a_large_body_is_refused_before_the_body_is_read(asgi_live_server, world):
    headers = {**JSON, "Content-Length": "4000000", "Authorization": "Bearer ocs_nope_secret"}
    response = raw_exchange(asgi_live_server.url, "POST", "/api/v1/assistants/", headers)

    assert response.status == 401
    assert envelope(response)["code"] == "invalid_api_key"


def test_a_revoked_key_sending_a_chunked_body_is_refused_before_the_body(asgi_live_server, world):
    key, secret = factories.make_api_key(world.acme, ["admin"])
    key.revoked_at = timezone.now()
    key.save(update_fields=["revoked_at"])
    headers = {**JSON, "Transfer-Encoding": "chunked", "Authorization": f"Bearer {secret}"}
    response = raw_exchange(asgi_live_server.url, "POST", "/api/v1/assistants/", headers)

    assert response.status == 401
    assert envelope(response)["code"] == "api_key_revoked"


def test_a_chunked_body_is_cut_off_at_the_limit(asgi_live_server, world, acme_secret, settings):
    settings.MAX_REQUEST_BYTES = 100_000
    headers = {**JSON, "Transfer-Encoding": "chunked", "Authorization": f"Bearer {acme_secret}"}
    body = chunked(b"x" * (settings.MAX_REQUEST_BYTES + 16 * 1024))

    response = raw_exchange(asgi_live_server.url, "POST", "/api/v1/assistants/", headers, body)

    assert response.status == 413
    assert envelope(response)["code"] == "payload_too_large"
    assert envelope(response)["details"] == {"limit": 100_000}


def test_a_chunked_body_within_the_limit_is_read_whole(asgi_live_server, world, acme_secret):
    payload = json.dumps({"slug": "chunky", "name": "Chunky"}).encode()
    headers = {**JSON, "Transfer-Encoding": "chunked", "Authorization": f"Bearer {acme_secret}"}

    response = raw_exchange(
        asgi_live_server.url, "POST", "/api/v1/assistants/", headers, chunked(payload, 7) + b"0\r\n\r\n"
    )

    assert response.status == 201, response.body
    assert json.loads(response.body)["slug"] == "chunky"


def test_a_content_length_that_is_no_number_is_a_400(asgi_live_server, world, acme_secret):
    headers = {**JSON, "Content-Length": "12abc", "Authorization": f"Bearer {acme_secret}"}
    response = raw_exchange(asgi_live_server.url, "POST", "/api/v1/assistants/", headers, b"{}")

    assert response.status == 400  # by the HTTP server or by the guard, never read as a body


# --- /v1 with the official openai SDK ------------------------------------------------------------


def test_v1_refuses_an_oversized_body_in_openais_shape(asgi_live_server, world, acme_secret, settings):
    settings.MAX_REQUEST_BYTES = 10_000
    client = openai.OpenAI(base_url=f"{asgi_live_server.url}/v1", api_key=acme_secret, max_retries=0)

    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "x" * 20_000}])

    assert raised.value.status_code == 413
    assert raised.value.code == "payload_too_large"
    assert raised.value.type == "invalid_request_error"
    assert "at most 10000 bytes" in raised.value.message


def test_v1_refuses_a_body_without_a_key_before_reading_it(asgi_live_server, world):
    response = raw_exchange(
        asgi_live_server.url, "POST", "/v1/chat/completions", {**JSON, "Content-Length": "4000000"}
    )

    assert response.status == 401
    assert json.loads(response.body)["error"] == {
        "message": "Authentication required: send 'Authorization: Bearer <api key>'.",
        "type": "authentication_error",
        "param": None,
        "code": "not_authenticated",
    }


def test_v1_refuses_a_declared_gibibyte_at_once(asgi_live_server, world, acme_secret):
    headers = {**JSON, "Content-Length": str(GIB), "Authorization": f"Bearer {acme_secret}"}
    response = raw_exchange(asgi_live_server.url, "POST", "/v1/chat/completions", headers)

    assert response.status == 413
    assert json.loads(response.body)["error"]["code"] == "payload_too_large"


# --- MCP with the official client ----------------------------------------------------------------


def test_mcp_refuses_an_oversized_call_with_a_json_rpc_error(asgi_live_server, world, acme_secret, settings):
    settings.MAX_REQUEST_BYTES = 10_000
    arguments = {"mode": "append", "content": "x" * 20_000}

    error = mcp_error(
        lambda: call_tool(mcp_url(asgi_live_server.url), acme_secret, "memory_write", arguments)
    )

    assert "at most 10000 bytes" in error.error.message
    assert error.error.data["code"] == "payload_too_large"
    assert not world.assistant.memory_documents.exists()


def test_mcp_refuses_a_declared_gibibyte_before_authenticating(asgi_live_server, world):
    response = raw_exchange(
        asgi_live_server.url, "POST", "/mcp/helper/", {**JSON, "Content-Length": str(GIB)}
    )

    assert response.status == 413
    answer = json.loads(response.body)
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["data"]["code"] == "payload_too_large"


def test_mcp_cuts_a_chunked_body_off_at_the_limit(asgi_live_server, world, acme_secret, settings):
    settings.MAX_REQUEST_BYTES = 100_000
    headers = {**JSON, "Transfer-Encoding": "chunked", "Authorization": f"Bearer {acme_secret}"}
    body = chunked(b"x" * (settings.MAX_REQUEST_BYTES + 16 * 1024))

    response = raw_exchange(asgi_live_server.url, "POST", "/mcp/helper/", headers, body)

    assert response.status == 413
    assert json.loads(response.body)["error"]["data"]["code"] == "payload_too_large"


def test_mcp_refuses_a_bad_key_with_a_message_the_client_shows(asgi_live_server, world):
    error = mcp_error(
        lambda: call_tool(
            mcp_url(asgi_live_server.url), "ocs_nope_secret", "memory_get", {"path": "MEMORY.md"}
        )
    )

    assert error.error.message == "The API key is not valid."
    assert error.error.data["code"] == "invalid_api_key"


# --- the dashboard -------------------------------------------------------------------------------


def test_an_anonymous_upload_is_refused_before_it_is_read(asgi_live_server, world):
    headers = {"Content-Type": "multipart/form-data; boundary=x", "Content-Length": "300000000"}
    response = raw_exchange(asgi_live_server.url, "POST", "/workspace/import/", headers)

    # Over the upload limit: refused for its size before anything else.
    assert response.status == 413
    headers["Content-Length"] = "3000000"
    response = raw_exchange(asgi_live_server.url, "POST", "/workspace/import/", headers)
    assert response.status == 401
    assert b"Sign in first" in response.body and response.getheader("Content-Type").startswith("text/html")


def test_a_signed_in_upload_over_the_upload_limit_is_refused_before_it_is_read(
    asgi_live_server, world, client, settings
):
    settings.MAX_UPLOAD_BYTES = 1_000_000
    client.force_login(world.alice)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    headers = {
        "Content-Type": "multipart/form-data; boundary=x",
        "Content-Length": "2000000",
        "Cookie": cookie,
    }

    response = raw_exchange(asgi_live_server.url, "POST", "/workspace/import/", headers)

    assert response.status == 413
    assert b"at most 1000000 bytes" in response.body


def test_an_upload_route_takes_more_than_a_form(asgi_live_server, world, client, settings):
    settings.MAX_REQUEST_BYTES = 10_000
    settings.MAX_UPLOAD_BYTES = 1_000_000
    client.force_login(world.alice)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    with httpx2.Client(base_url=asgi_live_server.url, cookies={settings.SESSION_COOKIE_NAME: session}) as web:
        upload = web.post(
            "/workspace/import/", data={"assistant": "x"}, files={"archive": ("w.zip", b"z" * 50_000)}
        )
        form = web.post("/accounts/password_change/", data={"old_password": "x" * 50_000})

    assert upload.status_code != 413  # judged by the import (not a zip), not by its size
    assert form.status_code == 413


# --- WSGI (Django's test client) -----------------------------------------------------------------


class UnreadableBody:
    """A request body that fails the test if anything reads it."""

    def read(self, *args: Any) -> bytes:
        raise AssertionError("the body was read")

    readline = read


def test_under_wsgi_an_unauthenticated_body_is_refused_unread(client, world):
    response = client.post(
        "/api/v1/assistants/",
        content_type="application/json",
        CONTENT_LENGTH="4000000",
        **{"wsgi.input": UnreadableBody()},
    )

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_under_wsgi_a_huge_declared_body_is_refused_unread(api):
    response = api.post(
        "/api/v1/assistants/",
        content_type="application/json",
        CONTENT_LENGTH=str(GIB),
        **{"wsgi.input": UnreadableBody()},
    )

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_under_wsgi_a_bad_key_with_a_large_body_is_refused_unread(client, world):
    response = client.post(
        "/v1/chat/completions",
        content_type="application/json",
        CONTENT_LENGTH=str(PREAUTH_BODY_BYTES + 1),
        HTTP_AUTHORIZATION="Bearer ocs_nope_secret",
        **{"wsgi.input": UnreadableBody()},
    )

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert response.json()["error"]["type"] == "authentication_error"


def test_under_wsgi_an_anonymous_upload_is_refused_unread(client, world):
    response = client.post(
        "/workspace/import/",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH="3000000",
        **{"wsgi.input": UnreadableBody()},
    )

    assert response.status_code == 401
    assert b"Sign in first" in response.content


def test_a_signed_in_small_form_still_works(client, world):
    client.force_login(world.alice)

    assert client.post("/workspace/import/", {"assistant": ""}).status_code == 422
