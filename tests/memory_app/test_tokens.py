"""Tests for memory_app.tokens (docs/openclaw-behaviour.md §1.2, docs/design.md §D3)."""

from __future__ import annotations

from memory_app.tokens import (
    IMAGE_TOKENS,
    ContextEstimate,
    calculate_context_tokens,
    corrected_estimate,
    correction_ratio,
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_messages_tokens,
    estimate_string_chars,
    estimate_text_tokens,
)

IMAGE = {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}


def _assistant(text: str, *, usage: dict | None = None, stop: str = "stop") -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "usage": usage,
        "stopReason": stop,
        "model": "m",
        "timestamp": 1,
    }


# --- estimate_string_chars -------------------------------------------------------------------


def test_ascii_counts_one_per_char() -> None:
    assert estimate_string_chars("") == 0
    assert estimate_string_chars("hello world") == 11


def test_cjk_counts_four_per_char() -> None:
    assert estimate_string_chars("你好世界") == 16
    assert estimate_string_chars("こんにちは") == 20  # hiragana
    assert estimate_string_chars("안녕") == 8  # Hangul syllables
    assert estimate_string_chars("ｱ") == 1  # halfwidth katakana U+FF71 is outside the ranges


def test_mixed_text() -> None:
    assert estimate_string_chars("Hello 世界!") == 7 + 2 * 4
    assert estimate_text_tokens("Hello 世界!") == 4  # ceil(15 / 4)


def test_range_edges() -> None:
    assert estimate_string_chars("\u2e7f") == 1
    assert estimate_string_chars("\u2e80") == 4
    assert estimate_string_chars("\u9fff") == 4
    assert estimate_string_chars("\ua000") == 4
    assert estimate_string_chars("\ua4ff") == 4
    assert estimate_string_chars("\ua500") == 1
    assert estimate_string_chars("\uf900") == 4
    assert estimate_string_chars("\ufb00") == 1


def test_cjk_extension_b_surrogate_pair_counts_as_one_weighted_char() -> None:
    # U+20000 is one code point (two UTF-16 units in JS); OpenClaw folds the pair and weights it.
    assert estimate_string_chars("\U00020000") == 4
    assert estimate_string_chars("a\U0002a6d6b") == 6
    assert estimate_string_chars("\U0002fa1f") == 4
    assert estimate_string_chars("\U0002fa20") == 2  # outside the range: plain astral char


def test_non_cjk_astral_chars_count_utf16_units_like_openclaw() -> None:
    # Emoji are not folded by OpenClaw's countCodePoints, so they keep their 2 UTF-16 units.
    assert estimate_string_chars("😀") == 2
    assert estimate_string_chars("😀你") == 6
    assert estimate_string_chars("😀\U00020000") == 6


def test_estimate_text_tokens_rounds_up() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("abcd") == 1
    assert estimate_text_tokens("abcde") == 2
    assert estimate_text_tokens("中") == 1
    assert estimate_text_tokens("中文测试一下") == 6


# --- estimate_message_tokens -----------------------------------------------------------------


def test_user_string_and_blocks() -> None:
    assert estimate_message_tokens({"role": "user", "content": "abcdefgh", "timestamp": 1}) == 2
    blocks = [{"type": "text", "text": "abcd"}, {"type": "text", "text": "你好"}]
    assert estimate_message_tokens({"role": "user", "content": blocks}) == 3  # ceil(12/4)


def test_user_images_add_1200_each() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE, IMAGE]}
    assert estimate_message_tokens(message) == 1 + 2 * IMAGE_TOKENS
    assert IMAGE_TOKENS == 1200


def test_assistant_text_thinking_and_tool_call() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "ok"},
            {"type": "thinking", "thinking": "hmm"},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.md", "n": 1}},
        ],
        "stopReason": "toolUse",
    }
    # 2 + 3 + len("read") + len('{"path":"a.md","n":1}') = 5 + 4 + 21 = 30 -> ceil(30/4) = 8
    assert estimate_message_tokens(message) == 8


def test_tool_call_arguments_keep_cjk_unescaped_and_weighted() -> None:
    message = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c", "name": "s", "arguments": {"q": "记忆"}}],
    }
    # 's' + '{"q":"记忆"}' = 1 + (8 + 2*4) = 17 -> 5 tokens (ensure_ascii would give 1 + 20)
    assert estimate_message_tokens(message) == 5


def test_tool_result_text_and_images() -> None:
    message = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "isError": False,
        "content": [{"type": "text", "text": "x" * 10}, IMAGE],
    }
    assert estimate_message_tokens(message) == 3 + IMAGE_TOKENS


def test_summary_system_and_unknown_roles() -> None:
    assert estimate_message_tokens({"role": "compactionSummary", "summary": "s" * 9}) == 3
    assert estimate_message_tokens({"role": "system", "content": "总结一下"}) == 4
    assert estimate_message_tokens({"role": "bashExecution", "command": "ls", "output": "a b"}) == 2
    assert estimate_message_tokens({"role": "mystery", "content": "x" * 100}) == 0


def test_estimate_messages_tokens_sums() -> None:
    messages = [{"role": "user", "content": "abcd"}, _assistant("abcdefgh")]
    assert estimate_messages_tokens(messages) == 3
    assert estimate_messages_tokens([]) == 0


# --- usage-based context estimate ------------------------------------------------------------


def test_calculate_context_tokens_prefers_total() -> None:
    assert (
        calculate_context_tokens(
            {"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "totalTokens": 500}
        )
        == 500
    )
    assert (
        calculate_context_tokens(
            {"input": 100, "output": 20, "cacheRead": 3, "cacheWrite": 4, "totalTokens": 0}
        )
        == 127
    )
    assert calculate_context_tokens({"input": 100, "output": 20}) == 120


def test_estimate_context_tokens_uses_last_valid_usage_plus_trailing() -> None:
    messages = [
        {"role": "user", "content": "a" * 40},
        _assistant(
            "b" * 40,
            usage={"input": 900, "output": 100, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1000},
        ),
        {"role": "user", "content": "c" * 40},
        _assistant("d" * 4, usage={"totalTokens": 99999}, stop="error"),
        _assistant("e" * 4, usage={"totalTokens": 88888}, stop="aborted"),
        _assistant("f" * 4, usage=None),
    ]
    assert estimate_context_tokens(messages) == ContextEstimate(
        tokens=1013, usage_tokens=1000, trailing_tokens=13, last_usage_index=1
    )


def test_estimate_context_tokens_skips_all_zero_usage() -> None:
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
    messages = [{"role": "user", "content": "a" * 8}, _assistant("b" * 8, usage=zero)]
    assert estimate_context_tokens(messages) == ContextEstimate(4, 0, 4, None)


def test_estimate_context_tokens_without_usage_sums_everything() -> None:
    messages = [{"role": "user", "content": "你好"}, _assistant("abcd")]
    assert estimate_context_tokens(messages) == ContextEstimate(3, 0, 3, None)
    assert estimate_context_tokens([]) == ContextEstimate(0, 0, 0, None)


def test_estimate_context_tokens_usage_on_last_message() -> None:
    messages = [{"role": "user", "content": "x"}, _assistant("y", usage={"totalTokens": 42})]
    assert estimate_context_tokens(messages) == ContextEstimate(42, 42, 0, 1)


# --- correction ratio ------------------------------------------------------------------------


def test_correction_ratio_is_reported_over_estimated() -> None:
    assert correction_ratio(1000, 1250) == 1.25
    assert correction_ratio(1000, 800) == 0.8


def test_correction_ratio_is_clamped() -> None:
    assert correction_ratio(100, 1000) == 2.0
    assert correction_ratio(1000, 10) == 0.5


def test_correction_ratio_without_data_is_neutral() -> None:
    assert correction_ratio(0, 500) == 1.0
    assert correction_ratio(500, 0) == 1.0
    assert correction_ratio(-1, 5) == 1.0


def test_corrected_estimate() -> None:
    assert corrected_estimate(1000, None) == 1000
    assert corrected_estimate(1000, 1.25) == 1250
    assert corrected_estimate(100, 1.1) == 110  # no extra token from float noise
    assert corrected_estimate(3, 1.5) == 5  # rounds up: 4.5 -> 5
    assert corrected_estimate(1000, 7.0) == 2000  # clamped again at use
    assert corrected_estimate(1000, 0.1) == 500


def test_an_active_memo_counts_each_message_object_once_and_copies_carry_it():
    from memory_app.tokens import EstimateMemo, carry_estimate, estimate_message_tokens

    stored = {"role": "user", "content": "x" * 40}
    memo = EstimateMemo()
    memo.remember(stored, 999)  # a stored estimate stands for the object
    twin = dict(stored)
    with memo.active():
        copy = dict(stored)
        carry_estimate(stored, copy)
        assert estimate_message_tokens(stored) == estimate_message_tokens(copy) == 999
        assert estimate_message_tokens(twin) == 10  # an equal object that nobody vouched for is counted
    assert estimate_message_tokens(stored) == 10  # outside the block nothing is remembered
