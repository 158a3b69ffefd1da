"""The usage and cost ledger: what every model call spent, priced, and its totals (docs/design.md, Usage and cost).

Every caller of a model (the turn, the memory flush, the compaction summary, an embedding pass)
records its tokens through `record_usage`, the one writer of `UsageRecord`. The prices are
`ModelPrice` rows, matched by the model's name or its longest prefix; the cost is fixed when the
tokens are spent, so a later price change does not rewrite the past. The figures are aggregated
in SQL (one GROUP BY per breakdown) from the team-scoped queryset `selectors.usage_records` gives.

Every turn prices two or three calls, so each process keeps the price table for
`PRICE_TABLE_SECONDS`; a price saved or deleted in this process clears it at once (the signals
connected in `openclaw_site.apps`), one saved in another applies there within that time.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from time import monotonic
from typing import Any

from django.db.models import Count, F, Max, Q, QuerySet, Sum
from django.db.models.functions import Coalesce, TruncDate

from openclaw_site.models import Assistant, ModelPrice, UsagePurpose, UsageRecord
from providers.chat import Usage

MILLION = Decimal(1_000_000)
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def price_for(model: str) -> ModelPrice | None:
    """Return the price of ``model``: an exact match, else the longest price name it starts with.

    A provider prefix ("openai/gpt-4o") is tried without it too.
    """
    names = {model, model.rsplit("/", 1)[-1]}
    best: ModelPrice | None = None
    for price in _price_table():
        if any(name.startswith(price.model) for name in names) and (
            best is None or len(price.model) > len(best.model)
        ):
            best = price
    return best


PRICE_TABLE_SECONDS = 30.0
_prices: tuple[float, tuple[ModelPrice, ...]] | None = None


def _price_table() -> tuple[ModelPrice, ...]:
    """Return every ModelPrice, read again once the process's copy is `PRICE_TABLE_SECONDS` old."""
    global _prices
    held = _prices
    if held is not None and monotonic() - held[0] < PRICE_TABLE_SECONDS:
        return held[1]
    table = tuple(ModelPrice.objects.all())
    _prices = (monotonic(), table)
    return table


def forget_prices(**_signal: Any) -> None:
    """Drop this process's copy of the price table (a price was saved or deleted)."""
    global _prices
    _prices = None


def cost_of(price: ModelPrice | None, usage: Usage) -> Decimal:
    """Return what ``usage`` costs at ``price`` (0 without a price)."""
    if price is None:
        return Decimal(0)
    spent = (
        usage.input * price.input_per_mtok
        + usage.output * price.output_per_mtok
        + usage.cache_read * price.cache_read_per_mtok
        + usage.cache_write * price.cache_write_per_mtok
    )
    return spent / MILLION


def openclaw_cost(model: str, usage: Usage) -> dict[str, float]:
    """Return Pi's AgentMessage ``usage.cost`` (dollars per kind of token) at the model's price."""
    price = price_for(model)
    parts = {
        "input": cost_of(price, Usage(input=usage.input)),
        "output": cost_of(price, Usage(output=usage.output)),
        "cacheRead": cost_of(price, Usage(cache_read=usage.cache_read)),
        "cacheWrite": cost_of(price, Usage(cache_write=usage.cache_write)),
    }
    return {**{k: float(v) for k, v in parts.items()}, "total": float(sum(parts.values()))}


def record_usage(
    *,
    assistant: Assistant,
    purpose: UsagePurpose | str,
    model: str,
    usage: Usage | None,
    session_id: int | None = None,
) -> UsageRecord | None:
    """Record one model call's tokens and cost; nothing when the provider reported no usage."""
    if usage is None:
        return None
    price = price_for(model)
    return UsageRecord.objects.create(
        team_id=assistant.team_id,
        assistant=assistant,
        session_id=session_id,
        purpose=purpose,
        model=model,
        input_tokens=usage.input,
        output_tokens=usage.output,
        cache_read_tokens=usage.cache_read,
        cache_write_tokens=usage.cache_write,
        cost=cost_of(price, usage),
        priced=price is not None,
    )


# --- reading the ledger ------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageRow:
    """The summed figures of one group (a purpose, an assistant, a session, a model or a day)."""

    key: Any
    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: Decimal
    unpriced: int = 0  # calls of models without a price
    name: str = ""  # what a person calls the group, when the key is not it (an assistant's name)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def label(self) -> str:
        """The group in words: a purpose's name, "deleted assistant" for a vanished one."""
        if self.key in UsagePurpose.values:
            return str(UsagePurpose(self.key).label)
        return "—" if self.key is None else self.name or str(self.key)

    @property
    def key_text(self) -> str | int | None:
        """The key as JSON shows it: a day in ISO 8601, a session id, a slug, a purpose or a model."""
        return self.key.isoformat() if isinstance(self.key, date) else self.key


@dataclass(frozen=True)
class UsageReport:
    """``GET /usage/``: the totals and one row per group of the breakdown ``by``."""

    by: str
    totals: UsageRow
    rows: list[UsageRow]


# What each breakdown groups by: a column or an expression of the record.
GROUPINGS: dict[str, Any] = {
    "purpose": F("purpose"),
    "assistant": F("assistant__slug"),
    "session": F("session_id"),
    "model": F("model"),
    "day": TruncDate("created_at"),
}

_SUMS = {
    "calls": Count("id"),
    **{name: Coalesce(Sum(name), 0) for name in TOKEN_FIELDS},
    "cost": Coalesce(Sum("cost"), Decimal(0)),
    "unpriced": Count("id", filter=Q(priced=False)),
}


# The name shown beside a group whose key is a slug.
NAMES: dict[str, Any] = {"assistant": Max("assistant__name")}


def _row(key: Any, values: Any) -> UsageRow:
    return UsageRow(key=key, name=values.get("name") or "", **{name: values[name] for name in _SUMS})


def totals(records: QuerySet[UsageRecord]) -> UsageRow:
    """Return the sums over every record of ``records`` (one aggregate query)."""
    return _row("total", records.aggregate(**_SUMS))


def breakdown(records: QuerySet[UsageRecord], by: str) -> list[UsageRow]:
    """Return the sums per ``by`` (a key of GROUPINGS), costliest first (days in date order)."""
    names = {"name": NAMES[by]} if by in NAMES else {}
    grouped = records.order_by().annotate(group=GROUPINGS[by]).values("group").annotate(**_SUMS, **names)
    ordering = ("group",) if by == "day" else ("-cost", "-input_tokens", "group")
    return [_row(values["group"], values) for values in grouped.order_by(*ordering)]


def daily(records: QuerySet[UsageRecord], *, first: date, last: date) -> list[UsageRow]:
    """Return one row per day from ``first`` to ``last``, days without calls at zero."""
    found = {row.key: row for row in breakdown(records, "day")}
    days = (first + timedelta(days=n) for n in range((last - first).days + 1))
    return [found.get(day) or UsageRow(day, 0, 0, 0, 0, 0, Decimal(0)) for day in days]


CSV_COLUMNS = ["created_at", "assistant", "session_id", "purpose", "model", *TOKEN_FIELDS, "cost"]


def csv_text(records: QuerySet[UsageRecord]) -> Iterable[str]:
    """Yield the records as CSV lines, header first (streamed: the ledger may be long)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def line(values: list[Any]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(values)
        return buffer.getvalue()

    yield line(CSV_COLUMNS)
    rows = records.order_by("created_at", "id").values_list(
        "created_at", "assistant__slug", "session_id", "purpose", "model", *TOKEN_FIELDS, "cost"
    )
    for values in rows.iterator(chunk_size=2000):
        yield line([values[0].isoformat(), *values[1:]])


# --- the daily chart (server-rendered SVG: docs/design.md, Usage and cost) ---------------------

CHART_HEIGHT = 100  # the SVG's viewBox height; bars are scaled to the busiest day
BAR_WIDTH = 10  # viewBox units per day, 2 of them the gap


@dataclass(frozen=True)
class ChartSegment:
    purpose: str
    tokens: int
    y: float
    height: float


@dataclass(frozen=True)
class ChartBar:
    day: date
    x: int
    tokens: int
    segments: tuple[ChartSegment, ...]

    @property
    def title(self) -> str:
        parts = ", ".join(f"{UsagePurpose(s.purpose).label.lower()} {s.tokens:,}" for s in self.segments)
        return f"{self.day:%b %-d}: {self.tokens:,} tokens" + (f" ({parts})" if parts else "")


@dataclass(frozen=True)
class Chart:
    bars: tuple[ChartBar, ...]
    peak: int

    @property
    def width(self) -> int:
        return max(1, len(self.bars)) * BAR_WIDTH

    height = CHART_HEIGHT


def chart(records: QuerySet[UsageRecord], *, first: date, last: date) -> Chart:
    """Return the bars of tokens per day from ``first`` to ``last``, stacked by purpose (one query)."""
    tokens = sum((F(name) for name in TOKEN_FIELDS[1:]), F(TOKEN_FIELDS[0]))
    cells = (
        records.order_by()
        .annotate(day=TruncDate("created_at"))
        .values("day", "purpose")
        .annotate(tokens=Sum(tokens))
    )
    per_day: dict[date, dict[str, int]] = {}
    for cell in cells:
        per_day.setdefault(cell["day"], {})[cell["purpose"]] = int(cell["tokens"] or 0)
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    peak = max((sum(v.values()) for v in per_day.values()), default=0)
    return Chart(
        bars=tuple(_bar(n, day, per_day.get(day, {}), peak) for n, day in enumerate(days)), peak=peak
    )


def _bar(index: int, day: date, by_purpose: dict[str, int], peak: int) -> ChartBar:
    segments: list[ChartSegment] = []
    top = float(CHART_HEIGHT)
    for purpose in UsagePurpose.values:
        spent = by_purpose.get(purpose, 0)
        if not spent:
            continue
        height = CHART_HEIGHT * spent / peak
        top -= height
        segments.append(ChartSegment(purpose=purpose, tokens=spent, y=round(top, 2), height=round(height, 2)))
    return ChartBar(day=day, x=index * BAR_WIDTH, tokens=sum(by_purpose.values()), segments=tuple(segments))
