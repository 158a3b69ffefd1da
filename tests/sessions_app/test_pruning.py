"""Tests for sessions_app.context.pruning (docs/openclaw-behaviour.md §3, docs/design.md §D5)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from openclaw_site.teams.assistant_settings import (
    HardClear,
    PruningSettings,
    SettingsError,
    SoftTrim,
    ToolMatch,
    default_settings,
    parse_duration_ms,
    parse_settings,
)
from sessions_app.context.pruning import (
    PruneChange,
    estimate_message_chars,
    is_prunable_tool,
    prune_context,
    should_prune,
)
from tests.messages import assistant, tool_call, tool_result, user

IMAGE = {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}
PLACEHOLDER = "[Old tool result content cleared]"


def ref(entry_id: str) -> str:
    return f"\n[Original: message {entry_id}; call tool_result_get to read it in full.]"


def call(name: str = "read") -> dict[str, Any]:
    return assistant(calls=[tool_call("c1", name)], model=None, timestamp=1)


def result(
    content: str | list[dict[str, Any]], *, name: str = "read", entry_id: str | None = None
) -> dict[str, Any]:
    extra = {"entryId": entry_id} if entry_id else {}
    return tool_result("c1", content, name=name, timestamp=1, **extra)


def tail3() -> list[dict[str, Any]]:
    """Three assistant turns that form the protected tail under keepLastAssistants=3."""
    return [assistant("a1"), user("more"), assistant("a2"), user("more"), assistant("a3")]


def text_of(message: dict[str, Any]) -> str:
    assert len(message["content"]) == 1
    return message["content"][0]["text"]


def settings(**cfg: Any) -> PruningSettings:
    """Return the typed `contextPruning` settings of a validated document (defaults filled)."""
    return parse_settings({"contextPruning": cfg}).pruning


# --- soft trim -------------------------------------------------------------------------------


def test_soft_trim_exact_text_with_reference() -> None:
    messages = [user(), call(), result("abcdefghij" * 1000, entry_id="a1b2c3d4"), *tail3()]
    before = copy.deepcopy(messages)
    out = prune_context(
        messages,
        settings=settings(softTrim={"maxChars": 10, "headChars": 6, "tailChars": 6}),
        context_window=1000,
    )
    expected = (
        "abcdef\n...\nefghij\n\n[Tool result trimmed: kept first 6 chars and last 6 chars "
        "of 10000 chars.]\n[Original: message a1b2c3d4; call tool_result_get to read it "
        "in full.]"
    )
    assert text_of(out.messages[2]) == expected
    assert out.changes == (PruneChange(2, "a1b2c3d4", "read", "trimmed", 10000, len(expected)),)
    assert out.changed is True
    assert messages == before  # input untouched
    assert out.messages[2] is not messages[2]
    assert all(out.messages[i] is messages[i] for i in range(len(messages)) if i != 2)
    assert {k: v for k, v in out.messages[2].items() if k != "content"} == {
        k: v for k, v in messages[2].items() if k != "content"
    }


def test_soft_trim_without_entry_id_has_no_reference() -> None:
    messages = [user(), call(), result("abcdefghij" * 1000), *tail3()]
    out = prune_context(
        messages,
        settings=settings(softTrim={"maxChars": 10, "headChars": 6, "tailChars": 6}),
        context_window=1000,
    )
    assert text_of(out.messages[2]) == (
        "abcdef\n...\nefghij\n\n[Tool result trimmed: kept first 6 chars and last 6 chars of 10000 chars.]"
    )
    assert out.changes[0].entry_id is None


def test_soft_trim_head_and_tail_cross_block_boundaries() -> None:
    blocks = [{"type": "text", "text": t} for t in ("abc", "defgh", "ij")]
    messages = [user(), call(), result(blocks, entry_id="0000beef"), *tail3()]
    out = prune_context(
        messages,
        settings=settings(softTrimRatio=0.0, softTrim={"maxChars": 5, "headChars": 5, "tailChars": 4}),
        context_window=100_000,
    )
    assert text_of(out.messages[2]) == (
        "abc\nd\n...\nh\nij\n\n[Tool result trimmed: kept first 5 chars and last 4 chars of "
        "12 chars.]" + ref("0000beef")
    )


def test_soft_trim_counts_utf16_units_and_never_splits_a_surrogate_pair() -> None:
    messages = [user(), call(), result("😀" * 10), *tail3()]
    out = prune_context(
        messages,
        settings=settings(softTrimRatio=0.0, softTrim={"maxChars": 5, "headChars": 3, "tailChars": 3}),
        context_window=100_000,
    )
    assert text_of(out.messages[2]) == (
        "😀\n...\n😀\n\n[Tool result trimmed: kept first 3 chars and last 3 chars of 20 chars.]"
    )


def test_short_results_and_generous_head_tail_are_left_alone() -> None:
    messages = [user(), call(), result("x" * 4000), call(), result("y" * 5000), *tail3()]
    out = prune_context(
        messages,
        settings=settings(
            softTrimRatio=0.0, softTrim={"maxChars": 4000, "headChars": 2500, "tailChars": 2500}
        ),
        context_window=100_000,
    )
    assert out.changes == ()
    assert out.messages == messages


def test_ratio_below_soft_trim_ratio_is_unchanged() -> None:
    messages = [user(), call(), result("x" * 20_000, entry_id="aaaa0001"), *tail3()]
    # 20k chars in an 80k-token window: ratio ~0.06 < 0.3.
    out = prune_context(messages, settings=settings(), context_window=80_000)
    assert out.changes == ()
    assert out.messages == messages
    assert out.messages is not messages


def test_cjk_text_weighs_four_times_in_the_ratio() -> None:
    cfg = {"softTrim": {"maxChars": 100, "headChars": 10, "tailChars": 10}}
    ascii_msgs = [user(), call(), result("a" * 400), *tail3()]
    cjk_msgs = [user(), call(), result("中" * 400), *tail3()]
    # charWindow 4000: 400 ASCII chars are ratio ~0.1, 400 CJK chars weigh 1600 (ratio ~0.4).
    assert prune_context(ascii_msgs, settings=settings(**cfg), context_window=1000).changes == ()
    out = prune_context(cjk_msgs, settings=settings(**cfg), context_window=1000)
    assert [c.action for c in out.changes] == ["trimmed"]
    assert text_of(out.messages[2]).startswith("中" * 10 + "\n...\n" + "中" * 10)


def test_missing_context_window_is_unchanged() -> None:
    messages = [user(), call(), result("x" * 100_000), *tail3()]
    assert prune_context(messages, settings=settings(), context_window=None).changes == ()
    assert prune_context(messages, settings=settings(), context_window=0).changes == ()


# --- protected ranges ------------------------------------------------------------------------


def test_last_assistants_and_bootstrap_reads_are_protected() -> None:
    big = "z" * 10_000
    messages = [
        call(),
        result(big, entry_id="b0075000"),  # bootstrap read before the first user
        user(),
        call(),
        result(big, entry_id="01d00001"),  # prunable
        assistant("a1"),  # cutoff: third-last assistant
        user(),
        call(),
        result(big, entry_id="7a110001"),  # protected tail
        assistant("a2"),
        assistant("a3"),
    ]
    out = prune_context(
        messages,
        settings=settings(softTrim={"maxChars": 10, "headChars": 2, "tailChars": 2}),
        context_window=1000,
    )
    assert [(c.index, c.entry_id) for c in out.changes] == [(4, "01d00001")]
    for index in (1, 8):
        assert out.messages[index] is messages[index]


def test_fewer_assistants_than_keep_last_is_unchanged() -> None:
    messages = [user(), call(), result("x" * 50_000), assistant("a1")]
    out = prune_context(
        messages,
        settings=settings(softTrim={"maxChars": 10, "headChars": 2, "tailChars": 2}),
        context_window=1000,
    )
    assert out.changes == ()
    assert out.messages == messages


def test_keep_last_assistants_zero_makes_everything_after_first_user_prunable() -> None:
    messages = [user(), call(), result("x" * 50_000, entry_id="0000000a")]
    out = prune_context(
        messages,
        settings=settings(keepLastAssistants=0, softTrim={"maxChars": 10, "headChars": 2, "tailChars": 2}),
        context_window=1000,
    )
    assert [(c.index, c.action) for c in out.changes] == [(2, "trimmed")]


def test_no_user_message_means_nothing_is_prunable() -> None:
    messages = [call(), result("x" * 50_000), assistant(), assistant(), assistant(), assistant()]
    out = prune_context(
        messages,
        settings=settings(softTrim={"maxChars": 10, "headChars": 2, "tailChars": 2}),
        context_window=1000,
    )
    assert out.changes == ()


# --- images ----------------------------------------------------------------------------------


def test_small_result_with_image_becomes_text_with_marker() -> None:
    blocks = [{"type": "text", "text": "screenshot of page"}, IMAGE]
    messages = [user(), call("browser"), result(blocks, name="browser", entry_id="1a2b3c4d"), *tail3()]
    out = prune_context(messages, settings=settings(softTrimRatio=0.0), context_window=100_000)
    expected = "screenshot of page\n[image removed during context pruning]" + ref("1a2b3c4d")
    assert text_of(out.messages[2]) == expected
    assert out.changes == (PruneChange(2, "1a2b3c4d", "browser", "images_removed", 18 + 8000, len(expected)),)


def test_large_result_with_image_is_trimmed_with_the_marker_in_place() -> None:
    blocks = [IMAGE, {"type": "text", "text": "q" * 100}]
    messages = [user(), call(), result(blocks), *tail3()]
    out = prune_context(
        messages,
        settings=settings(softTrimRatio=0.0, softTrim={"maxChars": 50, "headChars": 38, "tailChars": 3}),
        context_window=100_000,
    )
    assert text_of(out.messages[2]) == (
        "[image removed during context pruning]\n...\nqqq\n\n[Tool result trimmed: kept first 38 "
        "chars and last 3 chars of 139 chars.]"
    )


def test_user_images_are_never_modified() -> None:
    image_user = {"role": "user", "content": [{"type": "text", "text": "see"}, IMAGE]}
    messages = [image_user, call(), result("x" * 10), *tail3()]
    out = prune_context(messages, settings=settings(softTrimRatio=0.0), context_window=1000)
    assert out.messages[0] is image_user
    assert out.changes == ()


# --- hard clear ------------------------------------------------------------------------------


def _three_big_results() -> list[dict[str, Any]]:
    return [
        user(),
        call(),
        result("a" * 30_000, entry_id="00000001"),
        call(),
        result("b" * 30_000, entry_id="00000002"),
        call(),
        result("c" * 30_000, entry_id="00000003"),
        *tail3(),
    ]


NO_SOFT_TRIM = {"maxChars": 1_000_000}


def test_hard_clear_oldest_first_and_stops_below_ratio() -> None:
    messages = _three_big_results()
    # charWindow 160000; ~90k chars is ratio ~0.56 >= 0.5; one clear brings it to ~0.38.
    out = prune_context(messages, settings=settings(softTrim=NO_SOFT_TRIM), context_window=40_000)
    assert text_of(out.messages[2]) == PLACEHOLDER + ref("00000001")
    assert out.messages[4] is messages[4]
    assert out.messages[6] is messages[6]
    assert out.changes == (
        PruneChange(2, "00000001", "read", "cleared", 30_000, len(PLACEHOLDER + ref("00000001"))),
    )


def test_hard_clear_continues_while_ratio_stays_high() -> None:
    messages = _three_big_results()
    out = prune_context(
        messages, settings=settings(softTrim=NO_SOFT_TRIM, hardClearRatio=0.1), context_window=40_000
    )
    # After two clears ~30k chars remain (ratio ~0.19 >= 0.1), so the third goes too.
    assert [(c.index, c.action) for c in out.changes] == [(2, "cleared"), (4, "cleared"), (6, "cleared")]


def test_hard_clear_needs_min_prunable_tool_chars() -> None:
    messages = _three_big_results()
    out = prune_context(
        messages, settings=settings(softTrim=NO_SOFT_TRIM, minPrunableToolChars=90_001), context_window=40_000
    )
    assert out.changes == ()


def test_hard_clear_disabled() -> None:
    messages = _three_big_results()
    out = prune_context(
        messages,
        settings=settings(softTrim=NO_SOFT_TRIM, hardClear={"enabled": False}),
        context_window=40_000,
    )
    assert out.changes == ()


def test_custom_placeholder_and_trim_then_clear_reports_cleared() -> None:
    messages = _three_big_results()
    out = prune_context(
        messages,
        settings=settings(
            softTrim={"maxChars": 20_000, "headChars": 9_000, "tailChars": 9_000},
            hardClear={"placeholder": "  [gone]  "},
            hardClearRatio=0.2,
            minPrunableToolChars=0,
        ),
        context_window=40_000,
    )
    # Soft trim leaves ~54k chars (ratio ~0.34 >= 0.2); clearing #1 gives ~0.23, #2 gives ~0.12.
    assert [(c.index, c.action, c.chars_before) for c in out.changes] == [
        (2, "cleared", 30_000),
        (4, "cleared", 30_000),
        (6, "trimmed", 30_000),
    ]
    assert text_of(out.messages[2]) == "[gone]" + ref("00000001")
    assert text_of(out.messages[6]).startswith("c" * 9_000 + "\n...\n")


# --- tools allow / deny ----------------------------------------------------------------------


def test_tool_match_globs() -> None:
    match = ToolMatch(allow=("read*", "Exec"), deny=("READ_SECRET", "  "))
    assert is_prunable_tool(match, "read") is True
    assert is_prunable_tool(match, "Read_File") is True
    assert is_prunable_tool(match, "exec") is True
    assert is_prunable_tool(match, "read_secret") is False  # deny wins
    assert is_prunable_tool(match, "browser") is False  # not in a non-empty allow
    assert is_prunable_tool(ToolMatch(allow=(), deny=()), "anything") is True
    assert is_prunable_tool(ToolMatch(allow=(), deny=("*",)), "read") is False
    assert is_prunable_tool(ToolMatch(allow=("a.b",), deny=()), "axb") is False  # only * is a wildcard
    assert is_prunable_tool(ToolMatch(allow=("", " "), deny=()), "x") is True  # empty globs are dropped


def memory_get_and_exec_results() -> list[dict[str, Any]]:
    """A memory_get result (index 2) and an exec result (index 4), both large, then the tail."""
    return [
        user(),
        call("memory_get"),
        result("m" * 10_000, name="memory_get"),
        call("exec"),
        result("e" * 10_000, name="exec"),
        *tail3(),
    ]


def test_deny_protects_a_tool_from_pruning() -> None:
    messages = memory_get_and_exec_results()
    out = prune_context(
        messages,
        settings=settings(
            tools={"deny": ["MEMORY_*"]}, softTrim={"maxChars": 10, "headChars": 2, "tailChars": 2}
        ),
        context_window=1000,
    )
    assert [(c.index, c.tool_name) for c in out.changes] == [(4, "exec")]


def test_allow_limits_pruning_to_matching_tools() -> None:
    messages = memory_get_and_exec_results()
    out = prune_context(
        messages,
        settings=settings(
            tools={"allow": ["memory_*"]}, softTrim={"maxChars": 10, "headChars": 2, "tailChars": 2}
        ),
        context_window=1000,
    )
    assert [(c.index, c.tool_name) for c in out.changes] == [(2, "memory_get")]


# --- estimates -------------------------------------------------------------------------------


def test_estimate_message_chars_per_role() -> None:
    assert estimate_message_chars(user("你好 ok")) == 11
    assert (
        estimate_message_chars({"role": "user", "content": [{"type": "text", "text": "hi"}, IMAGE]}) == 8002
    )
    assert estimate_message_chars(result([{"type": "text", "text": "abc"}, IMAGE, IMAGE])) == 16003
    assert estimate_message_chars({"role": "system", "content": "x" * 5000}) == 256
    assert estimate_message_chars({"role": "compactionSummary", "summary": "s" * 5000}) == 256
    thinking = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "想", "thinkingSignature": "sig"},
            {"type": "redacted_thinking", "data": "abcd"},
            {"type": "toolCall", "id": "c", "name": "search", "arguments": {"q": "记忆"}},
        ],
    }
    # 4 + 3 + 4 + len('{"q":"记忆"}') (raw length 10, not CJK-weighted; the name is not counted)
    assert estimate_message_chars(thinking) == 21


# --- settings --------------------------------------------------------------------------------


def test_default_settings() -> None:
    s = settings()
    assert s == parse_settings(None).pruning == parse_settings(default_settings()).pruning
    assert (s.mode, s.ttl_ms, s.keep_last_assistants) == ("cache-ttl", 300_000, 3)
    assert (s.soft_trim_ratio, s.hard_clear_ratio, s.min_prunable_tool_chars) == (0.3, 0.5, 50_000)
    assert s.soft_trim == SoftTrim(4000, 1500, 1500)
    assert s.hard_clear == HardClear(True, "[Old tool result content cleared]")
    assert s.tools == ToolMatch(allow=(), deny=())
    assert default_settings()["contextPruning"]["ttl"] == "5m"


@pytest.mark.parametrize(
    ("ttl", "ms"),
    [
        ("5m", 300_000),
        ("1h", 3_600_000),
        ("30s", 30_000),
        ("5", 300_000),
        ("1.5h", 5_400_000),
        (" 2D ", 172_800_000),
        ("250ms", 250),
        (300_000, 300_000),
        (0, 0),
        ("0", 0),
    ],
)
def test_ttl_parsing(ttl: object, ms: int) -> None:
    assert settings(ttl=ttl).ttl_ms == ms


# The lenient parser these settings once went through kept the default for these; the schema,
# the one place a setting is checked, refuses them.
@pytest.mark.parametrize("ttl", ["bogus", "-5m", "5 m", "", -1, True, None])
def test_an_invalid_ttl_is_refused(ttl: object) -> None:
    with pytest.raises(SettingsError) as caught:
        settings(ttl=ttl)
    assert caught.value.path == "settings.contextPruning.ttl"


def test_settings_normalisation() -> None:
    s = settings(
        mode="always",
        keepLastAssistants=2,
        softTrimRatio=1,
        hardClearRatio=0,
        minPrunableToolChars=0,
        softTrim={"maxChars": 99, "headChars": 0},
        hardClear={"enabled": False, "placeholder": "  [cleared]  "},
        tools={"allow": ["read"]},
    )
    assert (s.mode, s.keep_last_assistants, s.soft_trim_ratio, s.hard_clear_ratio) == ("always", 2, 1.0, 0.0)
    assert s.min_prunable_tool_chars == 0
    assert s.soft_trim == SoftTrim(max_chars=99, head_chars=0, tail_chars=1500)
    assert s.hard_clear == HardClear(False, "[cleared]")
    assert s.tools == ToolMatch(allow=("read",), deny=())


# What the lenient parser used to floor, clamp or ignore is refused by validation, naming the key.
@pytest.mark.parametrize(
    ("cfg", "path"),
    [
        ({"keepLastAssistants": 2.7}, "keepLastAssistants"),
        ({"softTrimRatio": 1.5}, "softTrimRatio"),
        ({"hardClearRatio": -0.2}, "hardClearRatio"),
        ({"minPrunableToolChars": -10}, "minPrunableToolChars"),
        ({"softTrim": {"maxChars": 99.9}}, "softTrim.maxChars"),
        ({"softTrim": {"headChars": -1}}, "softTrim.headChars"),
        ({"tools": {"allow": ["read", 3]}}, "tools.allow[1]"),
        ({"tools": {"deny": "exec"}}, "tools.deny"),
        ({"mode": "sometimes"}, "mode"),
        ({"keepLastAssistants": True}, "keepLastAssistants"),
        ({"softTrimRatio": "0.9"}, "softTrimRatio"),
        ({"hardClear": {"enabled": "no"}}, "hardClear.enabled"),
        ({"hardClear": {"placeholder": "   "}}, "hardClear.placeholder"),
        ({"softTrim": "big"}, "softTrim"),
        ({"minPrunableToolChars": float("inf")}, "minPrunableToolChars"),
    ],
)
def test_settings_out_of_bounds_are_refused(cfg: dict[str, Any], path: str) -> None:
    with pytest.raises(SettingsError) as caught:
        settings(**cfg)
    assert caught.value.path == f"settings.contextPruning.{path}"


def test_settings_modes() -> None:
    assert settings(mode="off").mode == "off"
    assert settings(mode="cache-ttl").mode == "cache-ttl"


def test_parse_duration_ms() -> None:
    assert parse_duration_ms("250") == 250
    assert parse_duration_ms("5", default_unit="m") == 300_000
    assert parse_duration_ms("1.5s") == 1500
    assert parse_duration_ms("0.0005s") == 1  # rounds half up like Math.round
    with pytest.raises(ValueError):
        parse_duration_ms("five minutes")
    with pytest.raises(ValueError):
        parse_duration_ms("")


# --- TTL gate --------------------------------------------------------------------------------


def test_should_prune_cache_ttl_gate() -> None:
    s = settings()  # cache-ttl, 5 minutes
    assert should_prune(s, now_ms=1_000_000, last_cache_touch_at_ms=None) is False
    assert should_prune(s, now_ms=1_000_000, last_cache_touch_at_ms=1_000_000 - 299_999) is False
    assert should_prune(s, now_ms=1_000_000, last_cache_touch_at_ms=1_000_000 - 300_000) is True
    assert should_prune(s, now_ms=1_000_000, last_cache_touch_at_ms=0) is True
    zero_ttl = settings(ttl="0")
    assert should_prune(zero_ttl, now_ms=10**9, last_cache_touch_at_ms=0) is False


def test_should_prune_always_and_off() -> None:
    always = settings(mode="always")
    off = settings(mode="off")
    assert should_prune(always, now_ms=5, last_cache_touch_at_ms=None) is True
    assert should_prune(always, now_ms=5, last_cache_touch_at_ms=5) is True
    assert should_prune(off, now_ms=10**9, last_cache_touch_at_ms=0) is False
