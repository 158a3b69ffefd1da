"""Secrets are masked before transcripts are indexed (pure)."""

from __future__ import annotations

import pytest

from sessions_app.redaction import mask_token, redact_sensitive_text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("my key is sk-proj-abcdefghijklmnopqrstuvwxyz123456", "sk-proj-abcdefghijklmnopqrstuvwxyz123456"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", "abcdefghijklmnopqrstuvwxyz0123"),
        ("OPENAI_API_KEY=sk-abc12345678901234567890", "sk-abc12345678901234567890"),
        ("the password is hunter2", "hunter2"),
        ("password: s3cr3t!", "s3cr3t!"),
        ('{"apiKey": "abcdefghijklmnopqrstuvwxyz"}', "abcdefghijklmnopqrstuvwxyz"),
        ("postgres://bob:pw123@db.internal/app", "pw123"),
        ("run it with --password letmein", "letmein"),
        ("GitHub token ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
        ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
    ],
)
def test_secrets_are_masked(text: str, secret: str) -> None:
    redacted = redact_sensitive_text(text)
    assert secret not in redacted
    assert redacted != text


def test_private_keys_are_removed_whole() -> None:
    text = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----\nthanks"
    assert redact_sensitive_text(text) == "key:\n[REDACTED PRIVATE KEY]\nthanks"


def test_long_tokens_keep_their_ends_short_ones_vanish() -> None:
    assert mask_token("sk-abcdefghijklmnopqrstuvwxyz") == "sk-abc…wxyz"
    assert mask_token("short") == "***"


def test_ordinary_prose_is_left_alone() -> None:
    text = "We talked about the token budget and the password policy for next quarter."
    assert redact_sensitive_text(text) == text
