"""Secrets are masked before transcripts are indexed: each rule, and each end to end through search.

docs/redaction.md lists the rules; every one has a case in SECRETS, checked both on the pure
function and through the transcript index into search snippets (on Postgres).
"""

from __future__ import annotations

import pytest

from memory_app.search.hybrid import hybrid_search
from sessions_app.indexing import index_session_transcript
from sessions_app.redaction import mask_token, redact_sensitive_text
from tests import factories

# (id, text as written in a chat, the secret that must not reach an index or a snippet)
SECRETS = [
    ("aws-access-key-id", "aws key id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws-secret-access-key",
        "my AWS secret access key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "aws-secret-env",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("stripe-secret", "stripe key sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe-restricted", "restricted rk_live_51H8xYzAbCdEfGhIjKlMn", "rk_live_51H8xYzAbCdEfGhIjKlMn"),
    (
        "github-classic",
        "token ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    ),
    (
        "github-fine-grained",
        "pat github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    ),
    (
        "slack-bot",
        "slack xoxb-123456789012-1234567890123-AbCdEfGhIjKl",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKl",
    ),
    ("slack-user", "slack xoxp-1234-5678-90ab-cdefghijklmn", "xoxp-1234-5678-90ab-cdefghijklmn"),
    (
        "private-key",
        "deploy key -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    ),
    (
        "jwt",
        "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    ),
    ("password-is", "the password is hunter2", "hunter2"),
    ("password-for-is", "the password for the prod db is Tr0ub4dor&3", "Tr0ub4dor&3"),
    ("passwd-assignment", "passwd=CorrectHorse9", "CorrectHorse9"),
    ("pwd-colon", "pwd: Zx9!qq", "Zx9!qq"),
    ("secret-is", "the client secret is 8f2c1e9ab3d4", "8f2c1e9ab3d4"),
    ("token-equals", "token = tok_9a8b7c6d5e", "tok_9a8b7c6d5e"),
    ("german", "Das Passwort ist Geheim123!", "Geheim123!"),
    ("french", "le mot de passe est soleil42", "soleil42"),
    ("spanish", "la contraseña es perro99", "perro99"),
    ("chinese", "服务器的密码是abc123xyz，别忘了", "abc123xyz"),
    ("chinese-colon", "数据库密码：q1w2e3r4", "q1w2e3r4"),
    ("japanese", "パスワードはneko2024です", "neko2024"),
    ("japanese-colon", "パスワード：inu2025", "inu2025"),
    (
        "openclaw-site-key",
        "use ocs_1a2b3c4d_Q9s8d7f6g5h4j3k2l1zxcvbnm0987654321 for the api",
        "ocs_1a2b3c4d_Q9s8d7f6g5h4j3k2l1zxcvbnm0987654321",
    ),
]


@pytest.mark.parametrize(
    ("text", "secret"), [case[1:] for case in SECRETS], ids=[case[0] for case in SECRETS]
)
def test_each_rule_masks_its_secret(text: str, secret: str) -> None:
    assert secret not in redact_sensitive_text(text)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "secret"), [case[1:] for case in SECRETS], ids=[case[0] for case in SECRETS]
)
def test_secrets_never_reach_search_snippets(world, text: str, secret: str) -> None:
    session = factories.make_session(world.assistant, key="leaky")
    factories.add_messages(
        session,
        {"role": "user", "content": f"zanzibar note: {text}"},
        {"role": "assistant", "content": "zanzibar noted"},
    )
    index_session_transcript(session.pk)
    response = hybrid_search(assistant=world.assistant, query="zanzibar", mode="text", snippet_max_chars=700)
    snippets = [result.snippet for result in response.results]
    assert snippets and any("zanzibar note" in snippet for snippet in snippets)
    assert all(secret not in snippet for snippet in snippets)


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
