"""The dashboard's usage and cost page: the team's ledger totalled, broken down, charted, exported.

Thin like every dashboard view: the filter form is parsed here, the figures come from
`openclaw_site.usage.ledger` over the team-scoped records of `selectors.usage_records`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from django import forms
from django.db.models import QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from django.views.decorators.http import require_GET

from openclaw_site.models import Assistant, UsageRecord
from openclaw_site.selectors import assistant_get, assistant_list, usage_records
from openclaw_site.usage import ledger as usage
from openclaw_site.web.base import WebRequest, render_page, team_view

PERIODS = [(7, "Last 7 days"), (30, "Last 30 days"), (90, "Last 90 days")]


class UsageFilterForm(forms.Form):
    assistant = forms.SlugField(required=False)
    days = forms.TypedChoiceField(choices=PERIODS, coerce=int, required=False, empty_value=None)
    session = forms.IntegerField(required=False, min_value=1)


@dataclass(frozen=True)
class UsageScope:
    """What the page shows: the team's records of one assistant (or all) over the last days."""

    assistant: Assistant | None
    session_id: int | None
    first: date
    last: date
    days: int

    def records(self, request: WebRequest) -> QuerySet[UsageRecord]:
        return usage_records(
            team=request.web.team,
            assistant=self.assistant,
            session_id=self.session_id,
            since=self.first,
            until=self.last,
        )


def _scope(request: WebRequest) -> UsageScope:
    form = UsageFilterForm(request.GET)
    data = form.cleaned_data if form.is_valid() else {}
    days = data.get("days") or 30
    slug = data.get("assistant")
    last = timezone.localdate()
    return UsageScope(
        assistant=assistant_get(team=request.web.team, slug=slug) if slug else None,
        session_id=data.get("session"),
        first=last - timedelta(days=days - 1),
        last=last,
        days=days,
    )


@require_GET
@team_view
def usage_page(request: WebRequest) -> HttpResponse:
    """Tokens and cost of the team per purpose, assistant, model, session and day."""
    scope = _scope(request)
    records = scope.records(request)
    context = {
        "scope": scope,
        "periods": PERIODS,
        "assistants": assistant_list(team=request.web.team),
        "totals": usage.totals(records),
        "by_purpose": usage.breakdown(records, "purpose"),
        "by_assistant": usage.breakdown(records, "assistant"),
        "by_model": usage.breakdown(records, "model"),
        "by_session": usage.breakdown(records.filter(session_id__isnull=False), "session")[:10],
        "chart": usage.chart(records, first=scope.first, last=scope.last),
        "query": request.GET.urlencode(),
    }
    return render_page(request, "site/usage.html", context, partial="usage-report")


@require_GET
@team_view
def usage_csv(request: WebRequest) -> HttpResponseBase:
    """The records behind the page, one line per model call, as a CSV download."""
    scope = _scope(request)
    response = StreamingHttpResponse(
        usage.csv_text(scope.records(request)), content_type="text/csv; charset=utf-8"
    )
    name = f"usage-{request.web.team.slug}-{scope.first:%Y%m%d}-{scope.last:%Y%m%d}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
