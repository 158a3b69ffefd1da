"""Tests for providers.overflow (docs/openclaw-behaviour.md §1.4, T2 and T3)."""

from __future__ import annotations

import pytest

from providers.overflow import (
    is_compaction_failure_error,
    is_context_overflow_error,
    parse_observed_tokens,
)

OVERFLOW_MESSAGES = [
    # OpenAI chat completions
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "10052 tokens. Please reduce the length of the messages.",
    "This model's maximum context length is 128000 tokens. However, you requested 130,512 tokens "
    "(126,512 in the messages, 4,000 in the completion). Please reduce the length of the messages "
    "or completion.",
    'Error code: 400 - {"error": {"message": "...", "type": "invalid_request_error", '
    '"param": "messages", "code": "context_length_exceeded"}}',
    # OpenAI Responses API
    "Your input exceeds the context window of this model. Please adjust your input and try again.",
    # Anthropic
    "prompt is too long: 213,000 tokens > 200000 maximum",
    '400 {"type":"error","error":{"type":"invalid_request_error",'
    '"message":"prompt is too long: 208456 tokens > 200000 maximum"}}',
    "prompt is too long: 214290 tokens > 200000 maximum",  # "429" inside a count is no rate limit
    '413 {"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
    # Google Gemini / Vertex
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048576).",
    "INVALID_ARGUMENT: Request contains an invalid argument: maximum number of tokens exceeded",
    # xAI, Groq, OpenRouter, llama.cpp, LM Studio, Copilot, MiniMax, Kimi, Mistral
    "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
    "Please reduce the length of the messages or completion.",
    "This endpoint's maximum context length is 65536 tokens. However, you requested about 70000 tokens.",
    "the request exceeds the available context size, try increasing it",
    "tokens to keep from the initial prompt is greater than the context length",
    "prompt token count of 140000 exceeds the limit of 128000",
    "invalid params, context window exceeds limit (2013)",
    "Your request exceeded model token limit: 262144 (requested: 300000)",
    "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    # Cerebras: bodiless 400/413
    "400 status code (no body)",
    "413 (no body)",
    # AWS Bedrock, Ollama, DeepSeek
    "ValidationException: Input is too long for requested model.",
    "ValidationException: The input exceeds the maximum number of input tokens",
    "ollama: input exceeds context length of 8192",
    "deepseek: context length exceeds the model limit",
    # Generic / Azure / proxies
    "Unhandled stop reason: model_context_window_exceeded",
    "Context overflow: prompt too large for the model.",
    "token limit exceeded",
    "max_tokens would exceed the context window",
    # Chinese proxies
    "上下文过长，请压缩上下文后重试",
    "请求失败：超出最大上下文长度",
    "错误: 上下文长度超过模型限制",
    # Fallback regex only
    "Context window exceeded: requested 300000 tokens",
    "The request's input token count is over the limit for this model",
]

NOT_OVERFLOW_MESSAGES = [
    # rate limits / TPM (Groq uses 413 for TPM)
    "429 Too Many Requests: Too many tokens per minute. Please slow down.",
    "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): "
    "Limit 30000, Used 29000, Requested 5000.",
    "413 Request too large for model `llama3-70b-8192` in organization `org_x` on tokens per "
    "minute (TPM): Limit 6000, Requested 12000, please reduce your message size and try again.",
    "request reached organization TPD rate limit, current: 1000000, limit: 1000000",
    "RESOURCE_EXHAUSTED: Quota exceeded for aiplatform.googleapis.com/generate_content_requests",
    "429 status code (no body)",
    # billing
    "402 Payment Required: insufficient credits for this request",
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
    "to upgrade or purchase credits.",
    "billing error: request size exceeds your plan's maximum token limit",
    "You exceeded your current quota, please check your plan and billing details.",
    # reasoning required, window too small
    "Reasoning is mandatory for this endpoint and cannot be disabled.",
    "Model context window too small (4096 tokens). Minimum is 16000.",
    # unrelated
    "Internal server error",
    "Invalid API key provided: sk-****",
    "Connection timed out",
    "",
    None,
]


@pytest.mark.parametrize("text", OVERFLOW_MESSAGES)
def test_overflow_messages_are_detected(text: str) -> None:
    assert is_context_overflow_error(text) is True


@pytest.mark.parametrize("text", NOT_OVERFLOW_MESSAGES)
def test_non_overflow_messages_are_rejected(text: str | None) -> None:
    assert is_context_overflow_error(text) is False


def test_long_payload_mentioning_credits_is_still_overflow() -> None:
    # Billing words in a >512-char payload only count with an explicit 402 (OpenClaw `isBillingErrorMessage`).
    text = "prompt is too long: 250000 tokens > 200000 maximum. " + "buy credits " * 60
    assert len(text) > 512
    assert is_context_overflow_error(text) is True
    assert is_context_overflow_error("HTTP 402 " + text) is False


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("prompt is too long: 213,000 tokens > 200000 maximum", 213000),
        ("Prompt is too long: 208456 tokens > 200000 maximum", 208456),
        ("However, you requested 130,512 tokens (126,512 in the messages)", 130512),
        ("However, your messages resulted in 10052 tokens.", 10052),
        ("Your request exceeded model token limit: 262144 (requested: 300000)", None),
        ("requested 0 tokens", None),
        ("prompt is too long", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_observed_tokens(text: str | None, tokens: int | None) -> None:
    assert parse_observed_tokens(text) == tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Compaction failed: prompt is too long: 250000 tokens > 200000 maximum", True),
        ("Summarization failed: context window exceeded", True),
        ("auto-compaction: context overflow", True),
        ("compaction aborted: context overflow while summarizing", True),
        ("Compaction failed: timeout", False),
        ("prompt is too long: 250000 tokens > 200000 maximum", False),
        ("Compaction failed: 429 Too many tokens per minute", False),
        ("", False),
        (None, False),
    ],
)
def test_is_compaction_failure_error(text: str | None, expected: bool) -> None:
    assert is_compaction_failure_error(text) is expected
