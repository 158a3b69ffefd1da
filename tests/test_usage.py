"""The usage and cost ledger: every model call records its tokens and cost; pages and the API total them."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from memory_app.index.rows import index_document
from memory_app.tokens import estimate_text_tokens
from openclaw_site.models import ModelPrice, UsagePurpose, UsageRecord
from openclaw_site.selectors import usage_records
from openclaw_site.usage import ledger as usage
from providers.chat import Usage
from sessions_app.compaction.compact import compact_session
from sessions_app.turn.loop import run_turn
from tests import factories
from tests.chat_requests import message_input, router
from tests.embedding_fixtures import embedded_texts
from tests.fake_openai import text_reply
from tests.messages import assistant, chatter, user
from tests.messages import usage as agent_usage
from tests.views_support import HX, is_full_page, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def priced(world):
    ModelPrice.objects.update_or_create(
        model="fake-chat",
        defaults={
            "input_per_mtok": Decimal("2.00"),
            "output_per_mtok": Decimal("10.00"),
            "cache_read_per_mtok": Decimal("1.00"),
        },
    )


def spend(assistant_, purpose, tokens, *, model="fake-chat", session_id=None, days_ago=0):
    record = usage.record_usage(
        assistant=assistant_,
        purpose=purpose,
        model=model,
        usage=Usage(input=tokens, output=tokens // 10),
        session_id=session_id,
    )
    if days_ago:
        UsageRecord.objects.filter(pk=record.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
    return record


# --- prices -------------------------------------------------------------------------------------


def test_the_seeded_prices_match_dated_and_prefixed_model_names(db):
    assert usage.price_for("gpt-4o-mini-2024-07-18").model == "gpt-4o-mini"
    assert usage.price_for("gpt-4o-2024-08-06").model == "gpt-4o"
    assert usage.price_for("openai/gpt-4.1-mini").model == "gpt-4.1-mini"
    assert usage.price_for("claude-sonnet-4-5-20250929").model == "claude-sonnet-4"
    assert usage.price_for("my-local-llama") is None


def test_a_call_is_priced_by_kind_of_token(world):
    record = usage.record_usage(
        assistant=world.assistant,
        purpose=UsagePurpose.TURN,
        model="gpt-4o",
        usage=Usage(input=1_000_000, output=100_000, cache_read=200_000),
        session_id=7,
    )
    # 1M in at $2.50, 100k out at $10, 200k cache read at $1.25
    assert record.cost == Decimal("3.75") and record.priced
    assert (record.team, record.session_id, record.cache_read_tokens) == (world.acme, 7, 200_000)


def test_an_unpriced_model_costs_nothing_and_says_so(world):
    record = usage.record_usage(
        assistant=world.assistant, purpose=UsagePurpose.TURN, model="my-local-llama", usage=Usage(input=5)
    )
    assert record.cost == 0 and not record.priced
    assert usage.totals(usage_records(team=world.acme)).unpriced == 1


def test_no_reported_usage_records_nothing(world):
    assert usage.record_usage(assistant=world.assistant, purpose="turn", model="x", usage=None) is None
    assert not UsageRecord.objects.exists()


# --- the callers record -------------------------------------------------------------------------


def test_turn_flush_and_compaction_each_record_their_tokens(llm, world, priced):
    world.assistant.settings["compaction"]["keepRecentTokens"] = 300
    world.assistant.save()
    session = factories.make_session(world.assistant)
    factories.add_messages(
        session, *chatter(8), user("and?"), assistant("so.", usage=agent_usage(185000, 500))
    )
    llm.default_chat = router()
    compact_session(session_id=session.pk, trigger="manual")
    llm.queue(text_reply("hi there", usage={"prompt_tokens": 1200, "completion_tokens": 30}))
    run_turn(session=session, message=message_input(user("hello")))
    rows = {
        row.key: row
        for row in usage.breakdown(usage_records(team=world.acme, session_id=session.pk), "purpose")
    }
    assert set(rows) == {"turn", "flush", "compaction"}
    turn = rows["turn"]
    assert (turn.calls, turn.input_tokens, turn.output_tokens) == (1, 1200, 30)
    assert turn.cost == Decimal("0.0027")  # 1200 × $2 + 30 × $10 per million
    assert all(row.input_tokens > 0 for row in rows.values())
    reply = session.messages.filter(role="assistant").order_by("-seq").first()
    assert reply.usage["cost"]["total"] == pytest.approx(0.0027)  # the AgentMessage says it too


def test_an_embedding_pass_records_the_tokens_the_endpoint_billed(world, fake_embeddings):
    fake_embeddings.embedding_tokens_per_text = 1000
    document = factories.make_document(world.assistant, "MEMORY.md", "The launch is on Friday.\n" * 20)
    index_document(document.pk)
    [record] = UsageRecord.objects.filter(purpose=UsagePurpose.EMBEDDING)
    texts = embedded_texts(fake_embeddings)
    assert record.model == "fake-embedding" and record.assistant == world.assistant
    assert texts and record.input_tokens == 1000 * len(texts)


def test_an_endpoint_without_usage_is_recorded_at_the_estimate(world, fake_embeddings):
    fake_embeddings.embedding_usage = False
    document = factories.make_document(world.assistant, "MEMORY.md", "The launch is on Friday.\n" * 20)
    index_document(document.pk)
    [record] = UsageRecord.objects.filter(purpose=UsagePurpose.EMBEDDING)
    assert record.input_tokens == sum(estimate_text_tokens(text) for text in embedded_texts(fake_embeddings))


def test_the_local_e5_embedder_records_the_pieces_its_engine_read(world, recording_e5):
    document = factories.make_document(world.assistant, "MEMORY.md", "The launch is on Friday.\n" * 20)
    index_document(document.pk)
    [record] = UsageRecord.objects.filter(purpose=UsagePurpose.EMBEDDING)
    # The recording engine counts the words it read, "passage: " included, and two specials.
    assert recording_e5.read and record.input_tokens == sum(
        len(text.split()) + 2 for text in recording_e5.read
    )


# --- reading: SQL totals, isolation -------------------------------------------------------------


def test_breakdowns_sum_per_group_and_days_are_zero_filled(world, priced):
    spend(world.assistant, "turn", 1000, session_id=1)
    spend(world.assistant, "turn", 3000, session_id=2, days_ago=2)
    spend(world.assistant, "flush", 500, session_id=1)
    spend(world.other_assistant, "turn", 99999)  # globex: never in acme's figures
    records = usage_records(team=world.acme)
    assert usage.totals(records).input_tokens == 4500
    assert [(r.key, r.input_tokens) for r in usage.breakdown(records, "purpose")] == [
        ("turn", 4000),
        ("flush", 500),
    ]
    assert [(r.key, r.calls) for r in usage.breakdown(records, "session")] == [(2, 1), (1, 2)]
    today = timezone.localdate()
    days = usage.daily(records, first=today - timedelta(days=3), last=today)
    assert [d.input_tokens for d in days] == [0, 3000, 0, 1500]
    chart = usage.chart(records, first=today - timedelta(days=3), last=today)
    assert chart.peak == 3300 and [len(b.segments) for b in chart.bars] == [0, 1, 0, 2]
    assert chart.bars[1].segments[0].height == 100


# --- the page, the CSV, the API -----------------------------------------------------------------


def test_usage_page_full_and_htmx(world, priced):
    spend(world.assistant, "turn", 1000, session_id=5)
    spend(world.assistant, "compaction", 400, session_id=5)
    client = signed_in(world.vera)
    page = client.get("/usage/")
    assert page.status_code == 200 and is_full_page(page)
    text = page.content.decode()
    assert "Turns" in text and "Compaction summaries" in text and 'href="/sessions/5/"' in text
    assert "<svg" in text and "seg-compaction" in text
    partial = client.get("/usage/?assistant=helper&days=7", **HX)
    assert partial.status_code == 200 and not is_full_page(partial)
    assert 'id="usage-report"' in partial.content.decode()
    assert client.get("/usage/?assistant=rival").status_code == 404


def test_usage_names_assistants_and_right_aligns_the_figures(world, priced):
    world.assistant.name = "Launch Helper"
    world.assistant.save()
    spend(world.assistant, "turn", 1000, session_id=5)
    [row] = usage.breakdown(usage_records(team=world.acme), "assistant")
    assert (row.key, row.label) == ("helper", "Launch Helper")
    for htmx in (False, True):
        text = signed_in(world.vera).get("/usage/", **(HX if htmx else {})).content.decode()
        table = text[text.index('data-usage="usage-assistants"') :]
        assert re.search(r"<td>Launch Helper<div", table)
        assert '<td class="right"' in table


def test_a_sessions_page_and_its_usage_filter_show_its_own_spending(world, priced):
    session = factories.make_session(world.assistant)
    spend(world.assistant, "turn", 2000, session_id=session.pk)
    spend(world.assistant, "turn", 9000, session_id=session.pk + 1000)
    client = signed_in(world.vera)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Spent in this session: <strong>2.2k</strong>" in page
    assert f'href="/usage/?session={session.pk}"' in page
    filtered = client.get(f"/usage/?session={session.pk}", **HX).content.decode()
    assert f"session {session.pk}" in filtered and "9.9k" not in filtered and "2.2k" in filtered


def test_usage_csv_lists_the_calls(world, priced):
    spend(world.assistant, "turn", 1000, session_id=5)
    response = signed_in(world.bob).get("/usage/export.csv?days=7")
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0] == usage.CSV_COLUMNS
    assert rows[1][1:5] == ["helper", "5", "turn", "fake-chat"] and rows[1][5] == "1000"


def test_usage_api_by_purpose_and_day(api, world, priced):
    spend(world.assistant, "turn", 1000)
    spend(world.assistant, "embedding", 200, model="my-local-llama")
    body = api.get("/api/v1/usage/").json()
    assert body["by"] == "purpose" and body["totals"]["input_tokens"] == 1200
    assert body["totals"]["unpriced_calls"] == 1
    assert [row["key"] for row in body["rows"]] == ["turn", "embedding"]
    by_day = api.get("/api/v1/usage/", {"by": "day", "assistant": "helper"}).json()
    assert by_day["rows"][0]["key"] == timezone.now().date().isoformat()


@pytest.mark.parametrize(
    "query",
    [
        {"by": "weekday"},
        {"since": "yesterday"},
        {"session": "0"},
        {"since": "2026-02-02", "until": "2026-01-01"},
        {"colour": "red"},
    ],
)
def test_usage_api_refuses_bad_parameters(api, world, query):
    response = api.get("/api/v1/usage/", query)
    assert response.status_code == 400 and response.json()["error"]["code"] == "validation_error"


def test_usage_api_of_another_teams_assistant_is_404(api, world):
    assert api.get("/api/v1/usage/", {"assistant": "rival"}).status_code == 404


def test_a_price_saved_or_deleted_applies_to_the_next_call_at_once(world):
    def cost() -> Decimal:
        return usage.record_usage(
            assistant=world.assistant,
            purpose=UsagePurpose.TURN,
            model="house-model",
            usage=Usage(input=10**6),
        ).cost

    assert cost() == 0  # no price yet (and the table is now held by this process)
    price = ModelPrice.objects.create(model="house-model", input_per_mtok=Decimal("2.50"))
    assert cost() == Decimal("2.50")
    price.input_per_mtok = Decimal("1.00")
    price.save()
    assert cost() == Decimal("1.00")
    price.delete()
    assert cost() == 0
