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

# Well-known token shapes, after the rule sets of gitleaks and detect-secrets (docs/redaction.md
# lists them). Each pattern's group 1 is the secret.
_TOKEN_PATTERNS = [
    re.compile(r"\b(ocs_[0-9a-f]{8}_[A-Za-z0-9_\-]{16,})"),  # this server's own API keys
    re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,})"),  # OpenAI, Anthropic (sk-ant-), DeepSeek
    re.compile(r"\b((?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,})\b"),  # Stripe secret / restricted keys
    re.compile(r"\b(whsec_[A-Za-z0-9]{16,})\b"),  # Stripe webhook secrets
    re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,})\b"),
    re.compile(r"\b(github_pat_[A-Za-z0-9_]{20,})\b"),
    re.compile(r"\b(glpat-[A-Za-z0-9_\-]{20,})\b"),  # GitLab
    re.compile(r"\b(xox[a-z]-[A-Za-z0-9\-]{10,})\b"),  # Slack bot, user, app, config tokens
    re.compile(r"\b(xapp-[A-Za-z0-9\-]{10,})\b"),
    re.compile(r"(hooks\.slack\.com/services/[A-Za-z0-9/]{20,})"),
    re.compile(r"\b(gsk_[A-Za-z0-9_\-]{10,})\b"),
    re.compile(r"\b(AIza[0-9A-Za-z\-_]{20,})\b"),
    re.compile(r"\b(pplx-[A-Za-z0-9_\-]{10,})\b"),
    re.compile(r"\b(npm_[A-Za-z0-9]{10,})\b"),
    re.compile(r"\b(hf_[A-Za-z0-9]{20,})\b"),  # Hugging Face
    re.compile(r"\b(SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,})"),  # SendGrid
    re.compile(r"\b(shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32})\b"),  # Shopify
    re.compile(r"\b(dop_v1_[a-f0-9]{64})\b"),  # DigitalOcean
    re.compile(r"\b((?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})\b"),  # AWS access key ids
    re.compile(r"\b(eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})"),  # JWT
    re.compile(r"\b(\d{6,}:[A-Za-z0-9_\-]{30,})\b"),  # Telegram bot tokens
]
# An AWS secret access key: 40 base64 characters within a short distance after "aws" or "secret".
_AWS_SECRET = re.compile(
    r"((?:aws|secret)[^\n]{0,40}?)(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", re.IGNORECASE
)
_SECRET_WORDS = r"(?:api[_\-]?key|access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|token|secret|client[_\-]?secret|password|passwd|passphrase|pwd)"
# `Authorization: Bearer abc...` and a bare `Bearer abc...`.
_BEARER = re.compile(r"(\bBearer\s+)([A-Za-z0-9._~+/\-]+=*)", re.IGNORECASE)
_VALUE = r"([\"']?)([^\s\"'`,;]+)(\2)"
# KEY=value, "apiKey": "value", --password value, password: value, password is value.
_ASSIGNMENTS = [
    re.compile(rf"(\b[A-Z0-9_]*{_SECRET_WORDS}[A-Z0-9_]*\s*[=:]\s*){_VALUE}", re.IGNORECASE),
    re.compile(rf"(\"{_SECRET_WORDS}\"\s*:\s*\")([^\"]+)(\")", re.IGNORECASE),
    re.compile(rf"(--{_SECRET_WORDS}[=\s]+){_VALUE}", re.IGNORECASE),
    re.compile(rf"(\b{_SECRET_WORDS}\s+(?:is|was|=)\s+){_VALUE}", re.IGNORECASE),
    # Other languages: Passwort/Kennwort ist, mot de passe est, contraseña/clave es, senha é, пароль.
    re.compile(
        r"(\b(?:passwort|kennwort|mot de passe|contraseña|contrasena|clave|senha|пароль)\s*"
        rf"(?:ist|lautet|est|es|é|:|=|：|-|—)\s*){_VALUE}",
        re.IGNORECASE,
    ),
]
# Chinese and Japanese write no space: 密码是…, 密码：…, パスワードは…; the value ends at punctuation.
_CJK_PASSWORD = re.compile(r"((?:密码|密碼|口令|パスワード)\s*(?:是|为|為|は|：|:|=)\s*)([^\s，。、,;；」]+)")
# "the password for the prod db is Tr0ub4dor&3": a few words between, and a value that looks like
# a secret (a digit or a symbol in it), so that "the password policy is strict" stays readable.
_DISTANT_PASSWORD = re.compile(
    rf"(\b{_SECRET_WORDS}\b(?:\s+[^\s=:]+){{1,6}}?\s+(?:is|was|are|=|:)\s+){_VALUE}", re.IGNORECASE
)
_TRAILING_PUNCTUATION = ".!?)"
_SECRET_LOOKING = re.compile(r"[\d\W_]")


_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
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
    for pattern in _TOKEN_PATTERNS:
        text = pattern.sub(lambda m: mask_token(m.group(1)), text)
    text = _AWS_SECRET.sub(lambda m: m.group(1) + mask_token(m.group(2)), text)
    for pattern in _ASSIGNMENTS:
        text = pattern.sub(_mask_assignment, text)
    text = _CJK_PASSWORD.sub(lambda m: m.group(1) + _mask_value(m.group(2)), text)
    text = _DISTANT_PASSWORD.sub(_mask_distant_value, text)
    return text


def _mask_distant_value(match: re.Match[str]) -> str:
    prefix, quote, value, closing = match.groups()
    core = value.rstrip(_TRAILING_PUNCTUATION)
    if not _SECRET_LOOKING.search(core) or len(core) < 4:
        return match.group(0)
    return f"{prefix}{quote}{_mask_value(core)}{value[len(core) :]}{closing}"


def _mask_assignment(match: re.Match[str]) -> str:
    groups = match.groups()
    if len(groups) == 3:  # JSON field: prefix, value, closing quote
        prefix, value, closing = groups
        return f"{prefix}{_mask_value(value)}{closing}"
    prefix, quote, value, closing = groups
    return f"{prefix}{quote}{_mask_value(value)}{closing}"


def _mask_value(value: str) -> str:
    # Already masked (a bearer token inside an Authorization assignment): leave it alone.
    if value == "***" or "…" in value or value.lower() == "bearer" or value.startswith("[REDACTED"):
        return value
    return mask_token(value)
