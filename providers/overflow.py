"""Context-overflow classification of provider error text (docs/openclaw-behaviour.md §1.4, T2, T3).

Pure module: no Django. Rate-limit, billing and similar look-alikes are excluded first; then one
classifier folds OpenClaw's `isLikelyContextOverflowError` and Pi's `OVERFLOW_PATTERNS`, so every
provider error goes through one decision: the turn loop (sessions_app.turn.loop) compacts and retries,
or surfaces the error. `providers.errors.ProviderError.is_context_overflow` reads it.
"""

from __future__ import annotations

import re

# --- exclusions: errors that look like overflow but are not (OpenClaw's failover matchers) ---

# Groq answers 413 for tokens-per-minute limits: a rate limit, not an overflow.
_TPM_RE = re.compile(r"\btpm\b|tokens per minute", re.IGNORECASE)
# OpenClaw's failover rateLimit patterns. Upstream matches a bare "429" anywhere; we require a
# word boundary so a token count such as "214290 tokens" is not mistaken for an HTTP 429.
_RATE_LIMIT_RE = re.compile(
    r"rate[_ ]limit|too many requests|\b429\b|model_cooldown|exceeded your current quota"
    r"|resource has been exhausted|quota exceeded|resource_exhausted|usage limit|\btpm\b"
    r"|tokens per minute|tokens per day",
    re.IGNORECASE,
)
_BILLING_RE = re.compile(
    r"[\"']?(?:status|code)[\"']?\s*[:=]\s*402\b|\bhttp\s*402\b|\berror(?:\s+code)?\s*[:=]?\s*402\b"
    r"|\b(?:got|returned|received)\s+(?:a\s+)?402\b|^\s*402\s+payment|payment required"
    r"|insufficient credits|insufficient[_ ]quota|credit balance|plans & billing"
    r"|insufficient balance|insufficient usd or diem balance|requires?\s+more\s+credits",
    re.IGNORECASE,
)
_BILLING_HARD_402_RE = re.compile(
    r"[\"']?(?:status|code)[\"']?\s*[:=]\s*402\b|\bhttp\s*402\b|\berror(?:\s+code)?\s*[:=]?\s*402\b"
    r"|^\s*402\s+payment",
    re.IGNORECASE,
)
_BILLING_HEAD_RE = re.compile(
    r"^(?:error[:\s-]+)?billing(?:\s+error)?(?:[:\s-]+|$)"
    r"|^(?:error[:\s-]+)?(?:credit balance|insufficient credits?|payment required|http\s*402\b)",
    re.IGNORECASE,
)
_BILLING_MAX_LENGTH = 512
_CONTEXT_WINDOW_TOO_SMALL_RE = re.compile(r"context window.*(too small|minimum is)", re.IGNORECASE)

# --- overflow signals ------------------------------------------------------------------------

# OpenClaw `isContextOverflowError`: plain lowercase substrings.
_OVERFLOW_SUBSTRINGS = (
    "request_too_large",
    "request exceeds the maximum size",
    "context length exceeded",
    "maximum context length",
    "prompt is too long",
    "prompt too long",
    "exceeds model context window",
    "model token limit",
    "context overflow:",
    "exceed context limit",
    "exceeds the model's maximum context",
    "context_window_exceeded",
)
# OpenClaw: substrings that only count together.
_OVERFLOW_SUBSTRING_GROUPS = (
    ("invalid_argument", "maximum number of tokens"),
    ("input exceeds", "maximum number of tokens"),
    ("max_tokens", "exceed", "context"),
    ("input length", "exceed", "context"),
    ("413", "too large"),
)
# Chinese proxy error messages (OpenClaw), matched on the original text.
_OVERFLOW_CHINESE = ("上下文过长", "上下文超出", "上下文长度超", "超出最大上下文", "请压缩上下文")
# OpenClaw `PROVIDER_CONTEXT_OVERFLOW_PATTERNS` (Bedrock, Azure, Ollama, ...).
_PROVIDER_OVERFLOW_RES = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"ValidationException.*(?:input is too long|max input token|input token.*exceed)",
        r"ValidationException.*(?:exceeds? the (?:maximum|max) (?:number of )?(?:input )?tokens)",
        r"ModelStreamErrorException.*(?:Input is too long|too many input tokens)",
        r"content_filter.*(?:prompt|input).*(?:too long|exceed)",
        r"\bollama\b.*(?:context length|too many tokens|context window)",
        r"\btruncating input\b.*\btoo long\b",
        r"\bmistral\b.*(?:input.*too long|token limit.*exceeded)",
        r"\btotal tokens?.*exceeds? (?:the )?(?:model(?:'s)? )?(?:max|maximum|limit)",
        r"\bdeepseek\b.*(?:input.*too long|context.*exceed)",
        r"\binput (?:is )?too long for (?:the )?model\b",
    )
)
# Pi `OVERFLOW_PATTERNS` (T2), plus Cerebras' bodiless 400/413.
_PI_OVERFLOW_RES = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"prompt is too long",
        r"input is too long for requested model",
        r"exceeds the context window",
        r"input token count.*exceeds the maximum",
        r"maximum prompt length is \d+",
        r"reduce the length of the messages",
        r"maximum context length is \d+ tokens",
        r"exceeds the limit of \d+",
        r"exceeds the available context size",
        r"greater than the context length",
        r"context window exceeds limit",
        r"exceeded model token limit",
        r"too large for model with \d+ maximum context length",
        r"model_context_window_exceeded",
        r"context[_ ]length[_ ]exceeded",
        r"too many tokens",
        r"token limit exceeded",
        r"^4(00|13)\s*(status code)?\s*\(no body\)",
    )
)
_RATE_LIMIT_HINT_RE = re.compile(
    r"rate limit|too many requests|requests per (?:minute|hour|day)|quota|throttl|429\b"
    r"|tokens per day",
    re.IGNORECASE,
)
_OVERFLOW_HINT_RE = re.compile(
    r"context.*overflow"
    r"|context window.*(too (?:large|long)|exceed|over|limit|max(?:imum)?|requested|sent|tokens)"
    r"|prompt.*(too (?:large|long)|exceed|over|limit|max(?:imum)?)"
    r"|(?:request|input).*(?:context|window|length|token).*(too (?:large|long)|exceed|over|limit"
    r"|max(?:imum)?)",
    re.IGNORECASE,
)
# OpenClaw's observed-token patterns (T3); counts may carry thousands separators.
_OBSERVED_TOKENS_RES = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"prompt is too long:\s*([\d,]+)\s+tokens",
        r"requested\s+([\d,]+)\s+tokens",
        r"resulted in\s+([\d,]+)\s+tokens",
    )
)


def is_context_overflow_error(text: str | None) -> bool:
    """Tell whether a provider error means the prompt did not fit the context window."""
    if not text:
        return False
    if _is_excluded(text):
        return False
    if _has_overflow_signal(text):
        return True
    # The broad fallback regex also matches "request ... limit" rate-limit texts (as in OpenClaw).
    if _RATE_LIMIT_HINT_RE.search(text):
        return False
    return bool(_OVERFLOW_HINT_RE.search(text))


def _is_excluded(text: str) -> bool:
    """Tell whether text is a TPM, rate-limit, billing, reasoning or window-too-small error."""
    return (
        bool(_TPM_RE.search(text))
        or _is_reasoning_constraint(text)
        or _is_billing_error(text)
        or bool(_CONTEXT_WINDOW_TOO_SMALL_RE.search(text))
        or bool(_RATE_LIMIT_RE.search(text))
    )


def _is_reasoning_constraint(text: str) -> bool:
    """Tell whether the provider refused because reasoning cannot be turned off (OpenClaw)."""
    lower = text.lower()
    return (
        "reasoning is mandatory" in lower
        or "reasoning is required" in lower
        or "requires reasoning" in lower
        or ("reasoning" in lower and "cannot be disabled" in lower)
    )


def _is_billing_error(text: str) -> bool:
    """Tell whether text is a billing error (OpenClaw `isBillingErrorMessage`)."""
    if len(text) > _BILLING_MAX_LENGTH:
        # Long payloads mention "credits" in passing; only an explicit 402 counts there.
        return bool(_BILLING_HARD_402_RE.search(text))
    if _BILLING_RE.search(text):
        return True
    if not _BILLING_HEAD_RE.search(text):
        return False
    lower = text.lower()
    return any(word in lower for word in ("upgrade", "credits", "payment", "plan"))


def _has_overflow_signal(text: str) -> bool:
    """Tell whether text matches an OpenClaw substring, a provider pattern or a Pi pattern."""
    lower = text.lower()
    return (
        any(needle in lower for needle in _OVERFLOW_SUBSTRINGS)
        or any(all(part in lower for part in group) for group in _OVERFLOW_SUBSTRING_GROUPS)
        or ("request size exceeds" in lower and _mentions_context_window(lower))
        or any(phrase in text for phrase in _OVERFLOW_CHINESE)
        or any(pattern.search(text) for pattern in _PROVIDER_OVERFLOW_RES)
        or any(pattern.search(text) for pattern in _PI_OVERFLOW_RES)
    )


def _mentions_context_window(lower: str) -> bool:
    """Tell whether lowercase text names the context window or length."""
    return "context window" in lower or "context length" in lower


def parse_observed_tokens(text: str | None) -> int | None:
    """Return the prompt size a provider reported in an overflow error, if it names one."""
    if not text:
        return None
    for pattern in _OBSERVED_TOKENS_RES:
        match = pattern.search(text)
        if match is None:
            continue
        digits = match.group(1).replace(",", "")
        if digits and int(digits) > 0:
            return int(digits)
    return None


def is_compaction_failure_error(text: str | None) -> bool:
    """Tell whether the overflow came from compaction itself, so retrying cannot help."""
    if not text:
        return False
    lower = text.lower()
    # OpenClaw `isCompactionFailureError`: "compaction" also covers "compaction failed" and
    # "auto-compaction"; "summarization failed" is the other wording.
    if "compaction" not in lower and "summarization failed" not in lower:
        return False
    return is_context_overflow_error(text) or "context overflow" in lower
