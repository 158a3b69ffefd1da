"""Mask secrets in text before it is indexed (OpenClaw `redactSensitiveText`, docs/openclaw-behaviour.md §4.11).

Pure module: no Django. Transcripts go into the search index, whose snippets any team member and
the model can read back, so API keys, bearer tokens, passwords and private keys that someone
pasted into a chat are masked first. Like OpenClaw's `maskToken`, a long token keeps its first 6
and last 4 characters (enough to tell which key it was), a short one becomes `***`.
"""

from __future__ import annotations

import re

_MIN_PARTIAL_LENGTH = 18
_KEEP_START, _KEEP_END = 6, 4

# Well-known token shapes (OpenAI/Anthropic sk-, GitHub, Slack, Google, Groq, npm, AWS, JWT,
# Telegram bot tokens). Each pattern's group 1 is the secret.
_TOKEN_PATTERNS = [
    re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,})"),
    re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,})\b"),
    re.compile(r"\b(github_pat_[A-Za-z0-9_]{20,})\b"),
    re.compile(r"\b(xox[abprs]-[A-Za-z0-9\-]{10,})\b"),
    re.compile(r"\b(xapp-[A-Za-z0-9\-]{10,})\b"),
    re.compile(r"\b(gsk_[A-Za-z0-9_\-]{10,})\b"),
    re.compile(r"\b(AIza[0-9A-Za-z\-_]{20,})\b"),
    re.compile(r"\b(pplx-[A-Za-z0-9_\-]{10,})\b"),
    re.compile(r"\b(npm_[A-Za-z0-9]{10,})\b"),
    re.compile(r"\b((?:AKIA|ASIA)[0-9A-Z]{16})\b"),
    re.compile(r"\b(eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})"),
    re.compile(r"\b(\d{6,}:[A-Za-z0-9_\-]{30,})\b"),
]
_SECRET_WORDS = r"(?:api[_\-]?key|access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|token|secret|client[_\-]?secret|password|passwd|passphrase|pwd)"
# `Authorization: Bearer abc...` and a bare `Bearer abc...`.
_BEARER = re.compile(r"(\bBearer\s+)([A-Za-z0-9._~+/\-]+=*)", re.IGNORECASE)
# KEY=value, "apiKey": "value", --password value, password: value, password is value.
_ASSIGNMENTS = [
    re.compile(
        rf"(\b[A-Z0-9_]*{_SECRET_WORDS}[A-Z0-9_]*\s*[=:]\s*)([\"']?)([^\s\"'`,;]+)(\2)", re.IGNORECASE
    ),
    re.compile(rf"(\"{_SECRET_WORDS}\"\s*:\s*\")([^\"]+)(\")", re.IGNORECASE),
    re.compile(rf"(--{_SECRET_WORDS}[=\s]+)([\"']?)([^\s\"']+)(\2)", re.IGNORECASE),
    re.compile(rf"(\b{_SECRET_WORDS}\s+(?:is|was|=)\s+)([\"']?)([^\s\"'`,;]+)(\2)", re.IGNORECASE),
]
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)
# URL credentials: scheme://user:password@host.
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:)([^\s@/]+)(@)", re.IGNORECASE)


def mask_token(token: str) -> str:
    """Return ``token`` with its middle hidden, or `***` when it is too short to show any of it."""
    if len(token) < _MIN_PARTIAL_LENGTH:
        return "***"
    return f"{token[:_KEEP_START]}…{token[-_KEEP_END:]}"


def redact_sensitive_text(text: str) -> str:
    """Return ``text`` with API keys, bearer tokens, passwords and private keys masked."""
    if not text:
        return text
    text = _PEM.sub("[REDACTED PRIVATE KEY]", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}***{m.group(3)}", text)
    text = _BEARER.sub(lambda m: m.group(1) + mask_token(m.group(2)), text)
    for pattern in _ASSIGNMENTS:
        text = pattern.sub(_mask_assignment, text)
    for pattern in _TOKEN_PATTERNS:
        text = pattern.sub(lambda m: mask_token(m.group(1)), text)
    return text


def _mask_assignment(match: re.Match[str]) -> str:
    groups = match.groups()
    if len(groups) == 3:  # JSON field: prefix, value, closing quote
        prefix, value, closing = groups
        return f"{prefix}{_mask_value(value)}{closing}"
    prefix, quote, value, closing = groups
    return f"{prefix}{quote}{_mask_value(value)}{closing}"


def _mask_value(value: str) -> str:
    # Already masked (a bearer token inside an Authorization assignment): leave it alone.
    if value == "***" or "…" in value or value.lower() == "bearer":
        return value
    return mask_token(value)
