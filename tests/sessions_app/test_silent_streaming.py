"""What of a reply still arriving may be shown: never any part of a reply that ends up NO_REPLY."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.turn.silent import ReplyStream, streamable_text, visible_reply_text

FRAGMENTS = st.sampled_from(
    [
        "NO_REPLY",
        "NO_",
        "N",
        "NO",
        "no_reply",
        " ",
        "\n",
        "*",
        "**",
        "Hello",
        "The",
        ".",
        "{",
        '"action"',
        ":",
        '"NO_REPLY"',
        "}",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(FRAGMENTS, max_size=7))
def test_what_is_shown_early_is_always_the_start_of_what_the_finished_reply_shows(parts: list[str]) -> None:
    text = "".join(parts)
    final = visible_reply_text(text) or ""
    for end in range(len(text) + 1):
        assert final.startswith(streamable_text(text[:end]))


@pytest.mark.parametrize(
    "chunks",
    [
        ("NO_", "RE", "PLY"),
        ("N", "O", "_", "R", "E", "P", "L", "Y"),
        (" NO_REP", "LY "),
        ('{"action":', ' "NO_REPLY"}'),
    ],
)
def test_a_streamed_no_reply_shows_nothing(chunks: tuple[str, ...]) -> None:
    reply = ReplyStream()
    shown = [reply.add(chunk) for chunk in chunks]
    shown.append(reply.settle(visible_reply_text("".join(chunks))))
    assert not any(shown)


def test_a_reply_is_shown_as_it_arrives_and_settles_to_the_visible_text() -> None:
    reply = ReplyStream()
    shown = [reply.add(chunk) for chunk in ("No", ", I ", "think ", "so ")]
    shown.append(reply.settle(visible_reply_text(reply.text)))
    assert shown == ["", "No, I", " think", " so", ""]
    assert "".join(shown) == "No, I think so"


def test_a_trailing_token_is_held_back_and_never_shown() -> None:
    reply = ReplyStream()
    shown = [reply.add(chunk) for chunk in ("Done.", " NO_", "REPLY")]
    shown.append(reply.settle(visible_reply_text(reply.text)))
    assert "".join(shown) == "Done."
