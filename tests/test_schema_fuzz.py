"""A bounded schemathesis run against the live test server: no 5xx, every response as documented.

Every operation of the OpenAPI schema is called with a few dozen generated requests (valid and
invalid), authenticated with an all-scopes key of a team that has an assistant, a session with
messages and a memory document. Each answer must not be a server error, must have a documented
status code, and must match the documented body (the error envelope included).
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from tests import factories
from tests.conftest import ALL_SCOPES

pytestmark = pytest.mark.django_db(transaction=True)

MAX_EXAMPLES = 15


def api_schema() -> schemathesis.BaseSchema:
    """The schema the server serves at /api/v1/schema/, generated in process (pytest-django set Django up)."""
    from drf_spectacular.generators import SchemaGenerator

    document = SchemaGenerator().get_schema(request=None, public=True)
    return schemathesis.openapi.from_dict(json.loads(json.dumps(document, default=str)))


@pytest.fixture
def fuzz_headers(world) -> dict[str, str]:
    session = factories.make_session(world.assistant, "main")
    factories.add_messages(
        session, {"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}
    )
    factories.make_document(world.assistant, "MEMORY.md", "# Memory\n- fact\n")
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)
    return {"Authorization": f"Bearer {secret}"}


schema = api_schema()


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(case, live_server, fuzz_headers, no_llm):
    case.call_and_validate(
        base_url=live_server.url,
        headers=fuzz_headers,
        checks=[not_a_server_error, status_code_conformance, response_schema_conformance],
    )
