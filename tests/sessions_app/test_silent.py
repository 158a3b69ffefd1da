"""Tests for sessions_app.turn.silent (docs/openclaw-behaviour.md §2.6)."""

from __future__ import annotations

import pytest

from sessions_app.turn.silent import (
    SILENT_REPLY_TOKEN,
    is_silent_reply_prefix_text,
    is_silent_reply_text,
    starts_with_silent_token,
    strip_leading_silent_token,
    strip_silent_token,
)


def test_token_constant() -> None:
    assert SILENT_REPLY_TOKEN == "NO_REPLY"


@pytest.mark.parametrize(
    ("text", "silent"),
    [
        ("NO_REPLY", True),
        (" NO_REPLY ", True),
        ("\n\tNO_REPLY\n", True),
        ("no_reply", True),
        ("No_Reply", True),
        ("NO_REPLY.", False),
        ("Done. NO_REPLY", False),
        ("NO_REPLY then more", False),
        ("**NO_REPLY", False),
        ("**NO_REPLY**", False),
        ("NO_REPLY NO_REPLY", False),
        ("NO REPLY", False),
        ("", False),
        (None, False),
        ('{"action":"NO_REPLY"}', True),
        ('  { "action" : " NO_REPLY " }  ', True),
        ('{"action":"NO_REPLY","reason":"nothing to add"}', False),
        ('{"action":"no_reply"}', False),
        ('{"reply":"NO_REPLY"}', False),
        ('{"action":["NO_REPLY"]}', False),
        ('{"action":"NO_REPLY"', False),
        ('["NO_REPLY"]', False),
    ],
)
def test_whole_reply_matrix(text: str | None, silent: bool) -> None:
    assert is_silent_reply_text(text) is silent


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NO_REPLY", ""),
        ("  NO_REPLY  ", ""),
        ("Done. NO_REPLY", "Done."),
        ("Saved the note.\n\nNO_REPLY\n", "Saved the note."),
        ("**NO_REPLY", ""),
        ("Ok **NO_REPLY", "Ok"),
        ("Done.NO_REPLY", "Done.NO_REPLY"),  # glued to punctuation: not a separate token
        ("Done. no_reply", "Done. no_reply"),  # trailing strip is case-sensitive
        ("NO_REPLY then more", "NO_REPLY then more"),
        ("  plain text  ", "plain text"),
    ],
)
def test_strip_silent_token(text: str, expected: str) -> None:
    assert strip_silent_token(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NO_REPLYThe user is saying hi", True),
        ("  no_replyhello", True),
        ("NO_REPLY NO_REPLYok", True),
        ("NO_REPLY1", True),
        ("NO_REPLY 你好", False),
        ("NO_REPLY你好", True),
        ("NO_REPLY: explanation", False),
        ("NO_REPLY_", False),
        ("NO_REPLY", False),
        ("Hello NO_REPLYx", False),
        ("", False),
        (None, False),
    ],
)
def test_starts_with_silent_token(text: str | None, expected: bool) -> None:
    assert starts_with_silent_token(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NO_REPLYThe user is saying hi", "The user is saying hi"),
        ("NO_REPLY NO_REPLY  hello", "hello"),
        ("no_reply: why", ": why"),
        ("NO_REPLY", ""),
        ("hello NO_REPLY", "hello NO_REPLY"),
    ],
)
def test_strip_leading_silent_token(text: str, expected: str) -> None:
    assert strip_leading_silent_token(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NO", True),
        ("  NO", True),
        ("NO_", True),
        ("NO_RE", True),
        ("NO_REPLY", True),
        ("N", False),
        ("No", False),
        ("no_", False),
        ("NO_REPLY!", False),
        ("NOT", False),
        ("NO REPLY", False),
        ("NO_REPLYX", False),
        ("", False),
        ("   ", False),
        (None, False),
    ],
)
def test_is_silent_reply_prefix_text(text: str | None, expected: bool) -> None:
    assert is_silent_reply_prefix_text(text) is expected
