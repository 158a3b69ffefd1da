"""Shared fixtures: personas (healthchecks style), API clients, and the scripted model server.

alice: admin of team "acme"; bob: member of "acme"; vera: viewer of "acme";
charlie: member of another team, "globex". Nobody but acme's people may see acme's data.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from providers.chat import reset_providers
from tests.messages import CHAT_MODEL

if TYPE_CHECKING:  # imported by pytest as a plugin below, so that its asserts are rewritten
    from tests.fake_openai import FakeOpenAI

DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `pure` every test that asks for no database, so `make test-pure` runs them alone."""
    for item in items:
        wants_db = DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        if (
            not wants_db
            and not item.get_closest_marker("django_db")
            and not item.get_closest_marker("browser")
        ):
            item.add_marker(pytest.mark.pure)


# Fixture modules: the scripted OpenAI-compatible server, the embedders tests choose from, and the
# task brokers (ORM and a private Redis) for tests that run tasks through django-q2's queues, and
# the ASGI application under uvicorn (`asgi_live_server`).
pytest_plugins = [
    "tests.fake_openai",
    "tests.embedding_fixtures",
    "tests.task_brokers",
    "tests.asgi_server",
]


@pytest.fixture(autouse=True)
def fresh_process_copies() -> None:
    """Price and calibrate each test's calls from its own database: a rollback clears no process copy."""
    from openclaw_site.usage.ledger import forget_prices
    from sessions_app.context.figures import forget_calibrations

    forget_prices()
    forget_calibrations()


ALL_SCOPES = ["sessions:read", "sessions:write", "memory:read", "memory:write", "admin"]


@dataclass
class World:
    acme: Any
    globex: Any
    alice: Any
    bob: Any
    vera: Any
    charlie: Any
    assistant: Any
    other_assistant: Any


@pytest.fixture
def world(db) -> World:
    from tests import factories

    acme, globex = factories.make_team("acme"), factories.make_team("globex")
    return World(
        acme=acme,
        globex=globex,
        alice=factories.make_user("alice", team=acme, role="admin"),
        bob=factories.make_user("bob", team=acme, role="member"),
        vera=factories.make_user("vera", team=acme, role="viewer"),
        charlie=factories.make_user("charlie", team=globex, role="member"),
        assistant=factories.make_assistant(acme, "helper"),
        other_assistant=factories.make_assistant(globex, "rival"),
    )


def bearer_client(secret: str) -> Any:
    from rest_framework.test import APIClient  # lazy: pure tests run without Django set up

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def acme_secret(world) -> str:
    """The secret of an all-scopes API key of team acme, for clients other than DRF's."""
    from tests import factories

    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)
    return secret


@pytest.fixture
def api(acme_secret: str) -> Any:
    """A client with an all-scopes key of team acme."""
    return bearer_client(acme_secret)


@pytest.fixture
def other_api(world) -> Any:
    """A client with an all-scopes key of team globex."""
    from tests import factories

    _, secret = factories.make_api_key(world.globex, ALL_SCOPES)
    return bearer_client(secret)


@pytest.fixture
def scoped_api(world):
    """Build a client for team acme with exactly the given scopes."""

    from tests import factories

    def build(*scopes: str) -> Any:
        _, secret = factories.make_api_key(world.acme, list(scopes))
        return bearer_client(secret)

    return build


@pytest.fixture
def llm(fake_openai: FakeOpenAI, settings: Any) -> Iterator[FakeOpenAI]:
    """Point the chat and compaction models at the fake server (no retries, short timeout)."""
    settings.LLM_BASE_URL = fake_openai.base_url
    settings.LLM_API_KEY = "test-key"
    settings.LLM_MODEL = CHAT_MODEL
    settings.LLM_COMPACTION_MODEL = ""
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TIMEOUT_SECONDS = 5.0
    settings.LLM_MAX_TOOL_ROUNDS = 4
    reset_providers()
    yield fake_openai
    reset_providers()


@pytest.fixture
def no_llm(settings: Any) -> Iterator[None]:
    """No model configured: turns answer 503, compaction and flush go offline."""
    settings.LLM_BASE_URL = ""
    settings.LLM_MODEL = ""
    reset_providers()
    yield
    reset_providers()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the embedded PostgreSQL this run started, and fail the run if it is left running.

    A test run must leave nothing behind (docs/design.md, Stack: the embedded database's lifetime);
    a server found running (a `make run` of the same checkout) is not this run's to stop.
    """
    import sys

    db = sys.modules.get("openclaw_site.platform.db")
    if db is None:  # the settings used DATABASE_URL, or Django was never set up (pure tests)
        return
    from django.conf import settings
    from django.db import connections

    pgdata = settings.VAR_DIR / "pgdata"
    if settings.DATABASE_URL or not db.started_by_this_process(pgdata):
        return
    connections.close_all()
    db.stop_embedded_database(pgdata)
    if db.is_running(pgdata):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"The embedded PostgreSQL this run started still runs ({pgdata}).", red=True)
