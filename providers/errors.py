"""One `ProviderError` for chat and embedding calls, and the mapping from `openai` exceptions.

Every failure of a provider call becomes this error, classified once: context overflow (the turn
loop compacts and retries), timeout, rate limit, and whether the retry schedule may try again.
"""

from __future__ import annotations

import re

import openai

from providers.overflow import is_context_overflow_error

# OpenClaw `isRetryableEmbeddingError`, matched on the error text. With a real status its digits
# decide instead: the `5\d\d` text match would also retry a 400 that says "maximum input length
# is 512 tokens", so the status-less pattern alone carries the digits.
_RETRYABLE_TEXT_RE = re.compile(
    r"rate_limit|too many requests|resource has been exhausted|cloudflare|tokens per day",
    re.IGNORECASE,
)
_RETRYABLE_STATUS_TEXT_RE = re.compile(r"\b(?:429|5\d\d)\b")


class ProviderError(Exception):
    """Any failure of a model or embedding call, classified for the callers' recovery."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        is_timeout: bool = False,
        is_connection_error: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.is_timeout = is_timeout
        self.is_connection_error = is_connection_error

    @property
    def is_rate_limit(self) -> bool:
        """Tell whether the server answered 429."""
        return self.status == 429

    @property
    def is_context_overflow(self) -> bool:
        """Tell whether the request did not fit the model's context window."""
        # OpenClaw matches overflow on the error text; OpenAI-compatible servers put the decisive
        # part (`context_length_exceeded`) in `code`, so both are checked.
        texts = [self.message, self.code or "", f"{self.status} {self.message}" if self.status else ""]
        return any(text and is_context_overflow_error(text) for text in texts)

    @property
    def retryable(self) -> bool:
        """Tell whether the retry schedule may send the same request again."""
        return is_retryable(self)

    def __repr__(self) -> str:
        return f"ProviderError(status={self.status!r}, code={self.code!r}, message={self.message!r})"


def provider_error_from(exc: openai.OpenAIError) -> ProviderError:
    """Map any openai exception (chat or embeddings) to a ProviderError."""
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError("Request timed out.", is_timeout=True)
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(exc.message, is_connection_error=True)
    if isinstance(exc, openai.APIStatusError):
        return ProviderError(_error_text(exc), status=exc.status_code, code=exc.code)
    if isinstance(exc, openai.APIError):
        return ProviderError(exc.message, code=exc.code)
    return ProviderError(str(exc))


def malformed_response_error(exc: Exception) -> ProviderError:
    """The endpoint answered, but not with a response we can read (truncated or malformed JSON)."""
    return ProviderError(f"The model endpoint sent a malformed response ({type(exc).__name__}: {exc})")


def _error_text(exc: openai.APIStatusError) -> str:
    # The client's message is "Error code: 400 - ..."; the server's own message is clearer.
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    if isinstance(message, str) and message:
        return message
    return exc.message


def is_retryable(error: ProviderError) -> bool:
    """Tell whether the same request may succeed if sent again (rate limit, 5xx, lost connection)."""
    # Timeouts are not retried: a slow model would only be slow again, and the caller's own
    # deadline matters more (the turn loop decides). An overflow needs a smaller prompt first.
    if error.is_timeout or error.is_context_overflow:
        return False
    if error.is_connection_error:
        return True
    text = f"{error.message} {error.code or ''}"
    if _RETRYABLE_TEXT_RE.search(text):
        return True
    if error.status is None:
        return bool(_RETRYABLE_STATUS_TEXT_RE.search(text))
    return error.status == 429 or error.status >= 500
