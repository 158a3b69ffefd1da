"""One error shape everywhere under /api/, and an OpenAPI schema and Swagger UI that render."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.api_support import API, assert_error

pytestmark = pytest.mark.django_db


def test_unknown_urls_under_the_api_are_json_404s(api):
    assert_error(api.get(f"{API}/nothing-here/"), 404, "not_found")
    assert_error(api.get(f"{API}/nothing-here"), 404, "not_found")
    assert_error(APIClient().get("/api/v2/"), 404, "not_found")
    assert_error(api.get(f"{API}/sessions/not-a-number/"), 404, "not_found")


def test_wrong_methods_are_json_405s(api):
    assert_error(api.put(f"{API}/assistants/", {}, format="json"), 405, "method_not_allowed")
    assert_error(api.get(f"{API}/api-keys/1/"), 405, "method_not_allowed")
    assert_error(APIClient().post("/healthz"), 405, "method_not_allowed")


def test_unsupported_media_type_is_a_415_in_our_shape(api, world):
    response = api.post(f"{API}/assistants/", data="slug=x", content_type="application/x-www-form-urlencoded")
    assert_error(response, 415, "unsupported_media_type")


@pytest.mark.urls("tests.urls_errors")
def test_server_errors_are_json_500s_without_details():
    client = APIClient(raise_request_exception=False)
    for url in (f"{API}/test/broken-drf/", f"{API}/test/broken-plain/"):
        error = assert_error(client.get(url), 500, "server_error")
        assert "bug" not in error["message"]
    assert_error(client.get(f"{API}/test/bad-gateway/"), 502, "server_error")


def test_the_schema_lists_the_endpoints():
    response = APIClient().get(f"{API}/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    paths = schema["paths"]
    for expected in (
        "/api/v1/assistants/",
        "/api/v1/assistants/{slug}/",
        "/api/v1/sessions/{session_id}/messages/",
        "/api/v1/assistants/{slug}/memory/{path}",
        "/api/v1/assistants/{slug}/memory/{path}/revisions/",
        "/api/v1/api-keys/",
        "/api/v1/tasks/{task_id}/",
    ):
        assert expected in paths, expected
    assert set(paths["/api/v1/sessions/{session_id}/messages/"]) >= {"get", "post"}
    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"


def test_the_schema_generates_without_warnings(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--fail-on-warn", "--file", str(out))
    assert "/api/v1/assistants/" in out.read_text()


def test_swagger_ui_renders_from_local_static_files():
    response = APIClient().get(f"{API}/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html and "cdn.jsdelivr" not in html and "/static/drf_spectacular_sidecar/" in html
    # The start-up script is a file of its own, so the page runs under a script-src 'self' policy.
    assert "<script>" not in html and "script-src 'self'" in response["Content-Security-Policy"]
    script = APIClient().get(f"{API}/docs/", {"script": ""})
    assert script.status_code == 200 and "/api/v1/schema/" in script.content.decode()


def _schema() -> dict:
    response = APIClient().get(f"{API}/schema/")
    return yaml.safe_load(response.content)


def test_every_operation_documents_its_errors_with_the_envelope():
    schema = _schema()
    assert set(schema["components"]["schemas"]["Error"]["properties"]["error"]["required"]) == {
        "code",
        "message",
        "details",
    }
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            for status in ("400", "401", "403", "404", "429", "500", "503"):
                assert responses[status]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"
                }, (method, path, status)
            assert "Retry-After" in responses["429"]["headers"]


def test_the_schema_tells_the_truth_about_the_payloads():
    schema = _schema()
    components = schema["components"]["schemas"]
    assert components["ApiKeyOutput"]["properties"]["created_by"]["nullable"] is True
    assert components["AssistantOutput"]["properties"]["settings"]["type"] == "object"
    turn = schema["paths"]["/api/v1/sessions/{session_id}/messages/"]["post"]["responses"]
    turn_schema = components[turn["201"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]]
    assert {"messages", "reply", "tokens", "compactions"} <= set(turn_schema["properties"])
    assert {"409", "422", "502", "504"} <= set(turn)
    context = schema["paths"]["/api/v1/sessions/{session_id}/context/"]["get"]["responses"]["200"]
    assert context["content"]["application/json"]["schema"]["$ref"].endswith("/ContextOutput")
    compact = schema["paths"]["/api/v1/sessions/{session_id}/compact/"]["post"]["responses"]
    assert compact["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/CompactedOutput")
    parameters = {
        p["name"]: p["schema"]
        for p in schema["paths"]["/api/v1/assistants/{slug}/sessions/"]["get"]["parameters"]
    }
    assert parameters["slug"]["pattern"] == "^[-a-zA-Z0-9_]+$"
    assert (parameters["limit"]["minimum"], parameters["limit"]["maximum"]) == (1, 1000)
    assert parameters["offset"]["maximum"] == 2**53 - 1


def test_reindex_refuses_a_null_body(api, world):
    response = api.post(f"{API}/assistants/helper/reindex/", data="null", content_type="application/json")
    assert_error(response, 400, "invalid_body")
