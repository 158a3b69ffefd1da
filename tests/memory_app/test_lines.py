"""Line origins and the normal form duplicate checks compare (memory_app.governance.lines, pure)."""

from __future__ import annotations

from memory_app.governance.lines import (
    SELF,
    carry_origins,
    decode_runs,
    encode_runs,
    is_entry,
    normalise_line,
    similarity,
)


def test_the_normal_form_ignores_case_spacing_bullets_and_end_punctuation() -> None:
    forms = {
        normalise_line(text)
        for text in [
            "- Deploys go out on  Fridays.",
            "* deploys go out on fridays",
            "1. DEPLOYS go out on Fridays!",
            "- [x] Deploys go out on Fridays",
        ]
    }
    assert forms == {"deploys go out on fridays"}
    assert normalise_line("Deploys go out on Thursdays") != "deploys go out on fridays"


def test_blank_lines_headings_and_comments_are_not_entries() -> None:
    assert [is_entry(t) for t in ["", "   ", "## Notes", "<!-- x -->", "- ...", "- Fact"]] == [
        False,
        False,
        False,
        False,
        False,
        True,
    ]


def test_kept_lines_keep_their_origin_and_new_lines_get_the_new_revision() -> None:
    old = ["# Notes", "- a", "- b"]
    origins = carry_origins(old, [3, 3, 5], ["# Notes", "- a", "- new", "- b", "- c"], SELF)
    assert origins == [3, 3, SELF, 5, SELF]
    # A changed line is a new line; the lines around it keep theirs.
    assert carry_origins(old, [3, 3, 5], ["# Notes", "- A!", "- b"], 9) == [3, 9, 5]


def test_origins_are_stored_as_runs_and_self_is_the_holder() -> None:
    runs = encode_runs([4, 4, SELF, SELF, SELF, 4])
    assert runs == [[4, 2], [SELF, 3], [4, 1]]
    assert decode_runs(runs, own=11) == [4, 4, 11, 11, 11, 4]


def test_similarity_sees_through_the_markdown() -> None:
    assert similarity("- The weekly sync is on Tuesdays.", "the weekly sync is on tuesdays") == 1.0
    assert similarity("The weekly sync is on Tuesdays", "The weekly sync is on Thursdays") > 0.85
    assert similarity("The weekly sync is on Tuesdays", "Buy milk") < 0.5
