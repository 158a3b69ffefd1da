"""The one retry policy of chat and embedding calls: the schedule and which errors it retries."""

from __future__ import annotations

import pytest

from providers.errors import ProviderError
from providers.retry import Backoff


def test_default_schedule_doubles_from_half_a_second_with_jitter() -> None:
    delays = list(Backoff().delays())
    assert len(delays) == 3
    assert 0.5 <= delays[0] <= 0.6 and 1.0 <= delays[1] <= 1.2 and 2.0 <= delays[2] <= 2.4


def test_schedule_is_capped() -> None:
    assert list(Backoff(retries=4, base_seconds=4.0, jitter=0.0).delays()) == [4.0, 8.0, 8.0, 8.0]


def test_no_retries_means_no_delays() -> None:
    assert list(Backoff(retries=0).delays()) == []


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (ProviderError("Rate limit reached", status=429), True),
        (ProviderError("upstream broke", status=500), True),
        (ProviderError("bad gateway", status=502), True),
        (ProviderError("Connection error.", is_connection_error=True), True),
        # OpenClaw retries rate-limit wording whatever the status says.
        (ProviderError("You exceeded your tokens per day", status=400), True),
        (ProviderError("Bad request.", status=400, code="rate_limit_exceeded"), True),
        (ProviderError("upstream said 503", status=None), True),
        (ProviderError("Request timed out.", is_timeout=True), False),
        (ProviderError("maximum input length is 512 tokens", status=400), False),
        (ProviderError("Invalid value for 'temperature'.", status=400), False),
        (ProviderError("Bad request.", status=400, code="context_length_exceeded"), False),
        (ProviderError("prompt is too long: 213,000 tokens > 200000 maximum", status=500), False),
        (ProviderError("Expected 1536 dimensions, got 64."), False),
    ],
)
def test_retry_decision(error: ProviderError, retryable: bool) -> None:
    assert error.retryable is retryable


def test_flags_of_a_rate_limit() -> None:
    error = ProviderError("Rate limit reached", status=429, code="rate_limit_exceeded")
    assert (error.is_rate_limit, error.is_context_overflow, error.is_timeout) == (True, False, False)
    assert str(error) == "Rate limit reached"
