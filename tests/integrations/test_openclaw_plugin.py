"""The OpenClaw plugin (integrations/openclaw/) in the real OpenClaw, against the live server.

Each turn is `openclaw agent --local` of the published `openclaw@2026.9.6`, offline: its model and
ours are the scripted server of tests/fake_openai.py. Slow (12-20 s a turn on 2 cores): `make test`
runs these, `make test-fast` leaves them out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memory_app.models import MemoryDocument
from sessions_app.models import CompactionEntry, Message, Session
from tests import factories
from tests.conftest import ALL_SCOPES
from tests.fake_openai import FakeOpenAI, Reply, error_reply, text_reply, tool_call_reply
from tests.integrations.openclaw_runner import (
    OpenClawHome,
    documented_install_commands,
    free_port,
    reply_text,
    require_openclaw,
    wait_for_port,
)
from tests.messages import assistant, chatter, user

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _is_openclaw(request: dict[str, Any]) -> bool:
    """OpenClaw's requests carry its tools; our flush and compaction calls carry ours or none."""
    names = {tool.get("function", {}).get("name") for tool in request.get("tools") or []}
    return "memory_write" in names


def _last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


@pytest.fixture
def model(fake_openai: FakeOpenAI, settings: Any) -> FakeOpenAI:
    """One scripted model for OpenClaw and for our server's flush and compaction."""
    from providers.chat import reset_providers

    settings.LLM_BASE_URL = fake_openai.base_url
    settings.LLM_API_KEY = "test-key"
    settings.LLM_MODEL = "fake-chat"
    settings.LLM_MAX_RETRIES = 0
    reset_providers()
    fake_openai.default_chat = lambda request: (
        "Noted." if _is_openclaw(request) else "Summary of the early turns."
    )
    yield fake_openai
    reset_providers()


@pytest.fixture
def openclaw(tmp_path: Path, model: FakeOpenAI, asgi_live_server: Any, world: Any):
    require_openclaw()
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)

    def home(name: str = "one") -> OpenClawHome:
        return OpenClawHome(tmp_path / name, model.base_url, asgi_live_server.url, secret)

    return home


def _openclaw_requests(model: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in model.chat_requests if _is_openclaw(r)]


def test_a_turn_is_stored_once_under_openclaws_session_key(openclaw, model, world):
    answer = openclaw().turn("Hello there")
    assert "Noted." in reply_text(answer)
    assert "degraded to legacy" not in answer["_stderr"]
    session = Session.objects.get(assistant=world.assistant, key="agent:main:main")
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert [m.role for m in stored] == ["user", "assistant"]
    assert "Hello there" in json.dumps(stored[0].content) and stored[1].content[0]["text"] == "Noted."
    request = _openclaw_requests(model)[-1]
    assert "## Memory" in request["messages"][0]["content"]  # our memory prompt reached the model


def test_the_documented_install_makes_the_plugin_the_engine(tmp_path, model, asgi_live_server, world):
    require_openclaw()
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)
    home = OpenClawHome(
        tmp_path / "new-user", model.base_url, asgi_live_server.url, secret, with_plugin=False
    )
    commands = documented_install_commands(asgi_live_server.url, "helper")
    assert [c[:2] for c in commands] == [
        ["plugins", "install"],
        ["config", "set"],
        ["plugins", "enable"],
        ["config", "set"],
    ]
    for command in commands:
        done = home.run(*command, timeout=120)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    inspected = home.run("plugins", "inspect", "openclaw-site", "--runtime", "--json", timeout=120)
    plugin = json.loads(inspected.stdout[inspected.stdout.find("{") :])["plugin"]
    assert (plugin["status"], plugin["contextEngineIds"]) == ("loaded", ["openclaw-site"])
    assert plugin["toolNames"] == ["memory_search", "memory_get", "memory_write"]
    answer = home.turn("Hello from a new user")
    assert "Noted." in reply_text(answer) and "degraded to legacy" not in answer["_stderr"]
    assert Message.objects.filter(session__key="agent:main:main").count() == 2


def test_history_from_before_the_plugin_is_imported_the_first_time(tmp_path, model, asgi_live_server, world):
    require_openclaw()
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)
    home = OpenClawHome(tmp_path / "older", model.base_url, asgi_live_server.url, secret, with_plugin=False)
    home.turn("Said before the plugin was installed.")
    assert not Session.objects.filter(key="agent:main:main").exists()
    home.with_plugin = True
    home.config_path.write_text(json.dumps(home.config()))
    home.turn("Said with the plugin.")
    stored = [
        json.dumps(m.content) for m in Message.objects.filter(session__key="agent:main:main").order_by("seq")
    ]
    assert len(stored) == 4 and "before the plugin" in stored[0] and "with the plugin" in stored[2]


def test_a_session_begun_through_rest_is_what_the_model_sees(openclaw, model, world):
    session = factories.make_session(world.assistant, "agent:main:main")
    factories.add_messages(session, user("The launch code word is PELICAN."), assistant("Understood."))
    openclaw().turn("What was the code word?")
    sent = json.dumps(_openclaw_requests(model)[-1]["messages"])
    assert "The launch code word is PELICAN." in sent
    assert Message.objects.filter(session=session).count() == 4


def test_memory_search_answers_from_the_server(openclaw, model, world):
    factories.make_document(world.assistant, "MEMORY.md", "# Facts\n\nThe staging database is called heron.")
    model.queue(tool_call_reply([("memory_search", {"query": "staging database name"})]), text_reply("heron"))
    openclaw().turn("What is the staging database called?")
    results = [
        m for m in _openclaw_requests(model)[-1]["messages"] if m.get("role") == "tool" and "heron" in str(m)
    ]
    assert results and "MEMORY.md" in str(results[0])


def test_a_second_installation_finds_the_firsts_memory_write(openclaw, model, world):
    model.queue(
        tool_call_reply([("memory_write", {"mode": "append", "content": "The on-call phone is 555-0199."})]),
        text_reply("Saved."),
    )
    openclaw("first").turn("Remember: the on-call phone is 555-0199.", session_key="agent:main:first")
    note = MemoryDocument.objects.get(assistant=world.assistant, path__startswith="memory/")
    assert "555-0199" in note.content
    model.queue(tool_call_reply([("memory_search", {"query": "on-call phone"})]), text_reply("555-0199"))
    openclaw("second").turn("What is the on-call phone?", session_key="agent:main:second")
    assert "555-0199" in json.dumps(_openclaw_requests(model)[-1]["messages"])


def test_a_long_session_is_compacted_by_the_server_and_the_next_request_starts_from_the_summary(
    openclaw, model, world
):
    world.assistant.settings = {"compaction": {"reserveTokensFloor": 150_000}}
    world.assistant.save()
    session = factories.make_session(world.assistant, "agent:main:main")
    factories.add_messages(session, *chatter(30, words=400))
    openclaw().turn("Carry on.")
    assert CompactionEntry.objects.filter(session=session).exists()
    openclaw().turn("And now?")
    first = _openclaw_requests(model)[-1]["messages"][1]
    assert "compacted into the following summary" in json.dumps(first)


OVERFLOW = (
    "This model's maximum context length is 200000 tokens. However, your messages resulted in 250000 tokens."
)


def test_an_overflow_is_recovered_by_the_servers_compaction(openclaw, model, world):
    session = factories.make_session(world.assistant, "agent:main:main")
    factories.add_messages(session, *chatter(30, words=400))  # above keepRecentTokens: something to summarise
    refused: list[bool] = []

    def overflow_once(request: dict[str, Any]) -> Reply | str:
        if not _is_openclaw(request):
            return "Summary of the early turns."
        if not refused:
            refused.append(True)
            return error_reply(400, OVERFLOW, code="context_length_exceeded")
        return "Noted."

    model.default_chat = overflow_once
    answer = openclaw().turn("One more thing.")
    assert "Noted." in reply_text(answer)
    entry = CompactionEntry.objects.get(session=session)
    assert entry.trigger == "overflow" and entry.run.flush_outcome
    assert "compacted into the following summary" in json.dumps(_openclaw_requests(model)[-1]["messages"][1])


def test_openclaw_sessions_compact_runs_the_servers_compaction(openclaw, model, world):
    session = factories.make_session(world.assistant, "agent:main:main")
    factories.add_messages(session, *chatter(30, words=400))
    home = openclaw()
    port, token = free_port(), "gateway-test-token"
    gateway = home.gateway(port, token)
    try:
        wait_for_port(port, timeout=120)
        turn = home.run(
            "agent", "--agent", "main", "--session-key", "agent:main:main", "--message", "Hi", "--json"
        )
        assert turn.returncode == 0, turn.stderr[-3000:]
        done = home.run("sessions", "compact", "agent:main:main", "--json")
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    entry = CompactionEntry.objects.get(session=session)
    assert entry.trigger == "manual" and entry.summary.startswith("Summary of the early turns.")


def test_a_server_outage_loses_and_doubles_nothing(openclaw, model, world, asgi_live_server):
    home = openclaw()
    home.turn("Before the outage.")
    config = home.config()
    config["plugins"]["entries"]["openclaw-site"]["config"]["baseUrl"] = "http://127.0.0.1:9"
    home.config_path.write_text(json.dumps(config))
    during = home.turn("During the outage.")
    assert "Noted." in reply_text(during)
    spooled = list((home.root / "state").rglob("openclaw-site-spool/*.json"))
    assert len(spooled) == 1
    home.config_path.write_text(json.dumps(home.config()))
    home.turn("After the outage.")
    texts = [
        json.dumps(m.content) for m in Message.objects.filter(session__key="agent:main:main").order_by("seq")
    ]
    users = [t for t in texts if "outage" in t and "Noted" not in t]
    assert len(users) == 3 and "Before" in users[0] and "During" in users[1] and "After" in users[2]
    assert not list((home.root / "state").rglob("openclaw-site-spool/*.json"))
