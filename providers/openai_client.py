"""The `openai.OpenAI` client both OpenAI-compatible backends use, and their one retry loop."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import openai

from providers.errors import malformed_response_error, provider_error_from
from providers.retry import Backoff

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Some OpenAI-compatible servers (vLLM, llama.cpp, Ollama) need no key, but the client needs one.
PLACEHOLDER_API_KEY = "not-needed"


def make_openai_client(*, base_url: str | None, api_key: str, timeout_seconds: float) -> openai.OpenAI:
    """Build a client for an OpenAI-compatible endpoint, with the client's own retries off."""
    # Our retries follow one schedule and classify errors first (providers.retry), so the
    # client must not retry behind them.
    return openai.OpenAI(
        base_url=base_url or None,
        api_key=api_key or PLACEHOLDER_API_KEY,
        timeout=timeout_seconds,
        max_retries=0,
    )


def call_with_retries(
    request: Callable[[], T], *, backoff: Backoff, sleep: Callable[[float], None], what: str
) -> T:
    """Run one API request, retrying retryable failures on the schedule; raise ProviderError.

    A body that is not the JSON it claims to be (truncated, malformed: the client raises a
    ValueError) is a provider fault like any other, and is not retried.
    """
    delays = backoff.delays()
    attempt = 0
    while True:
        try:
            return request()
        except ValueError as exc:
            raise malformed_response_error(exc) from exc
        except openai.OpenAIError as exc:
            error = provider_error_from(exc)
            delay = next(delays, None) if error.retryable else None
            if delay is None:
                raise error from exc
            attempt += 1
            logger.warning("%s failed (%s); retry %d in %.2fs", what, error.message, attempt, delay)
            sleep(delay)
