"""LoCoMo recall before and after consolidating (`evaluation.locomo_memory`, docs/evaluation.md).

The planting tests are pure; the others plant a tiny LoCoMo-shaped conversation's facts in real
Postgres, run the real consolidation pass, review and search, with FakeOpenAI's bag-of-words
embeddings. No test asserts a recall figure of the real data set.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from evaluation.locomo_memory import (
    Planting,
    copy_of,
    memory_questions,
    plant_memory,
    run_memory_evaluation,
)
from memory_app.governance.consolidation import SEMANTIC_DUPLICATE
from memory_app.governance.lines import normalise_line, similarity
from memory_app.models import Proposal
from memory_app.search.calibration import scale_for
from openclaw_site.models import Team
from providers.embeddings import get_embedder

EVERY_FACT_TWICE = Planting(repeat_share=1.0, within=1, memory_share=0.0)
NO_COPIES = Planting(repeat_share=0.0, memory_share=0.0)


def sample(*observations: list[list[str]]) -> dict:
    """A LoCoMo-shaped conversation: one session a day, each with Anna's observations."""
    conversation: dict = {"speaker_a": "Anna", "speaker_b": "Ben"}
    for number, _ in enumerate(observations, start=1):
        conversation[f"session_{number}_date_time"] = f"1:00 pm on {number} May, 2023"
        conversation[f"session_{number}"] = [{"speaker": "Anna", "dia_id": f"D{number}:1", "text": "hi"}]
    return {
        "sample_id": "tiny",
        "conversation": conversation,
        "observation": {
            f"session_{number}_observation": {"Anna": rows} for number, rows in enumerate(observations, 1)
        },
        "qa": [
            {"question": "When was the lighthouse painted?", "evidence": ["D1:1"], "category": 4},
            {
                "question": "Which red kayak, which cat named Miso?",
                "evidence": ["D1:2", "D2:1"],
                "category": 1,
            },
            {"question": "Who is Anna's neighbour?", "evidence": ["D9:9"], "category": 4},
            {"question": "Did Anna fly to Mars?", "evidence": ["D1:1"], "category": 5},
        ],
    }


FACTS = sample(
    [
        ["Anna painted a lighthouse at dawn last week.", "D1:1"],
        ["Anna rented a red kayak for the lake trip.", "D1:2"],
    ],
    [["Anna adopted a cat named Miso from the shelter.", "D2:1"]],
    [["Anna is learning to play the cello.", "D3:1"]],
)


def test_copies_say_the_same_thing_in_another_form() -> None:
    line = "- Anna really likes the lighthouse she painted at dawn."
    assert copy_of(line, "verbatim") == line
    reformatted = copy_of(line, "reformatted")
    assert reformatted != line and normalise_line(reformatted) == normalise_line(line)
    reworded = copy_of(line, "reworded")
    assert normalise_line(reworded) != normalise_line(line) and similarity(reworded, line) >= 0.9
    assert normalise_line(copy_of("- Anna paints", "reworded")) == normalise_line("- Anna paints")


def test_planted_copies_state_the_fact_they_copy() -> None:
    memory = plant_memory(FACTS, EVERY_FACT_TWICE)
    assert len(memory.facts) == 4 and sum(memory.copies.values()) == 3  # the last note's fact stays one
    notes = {path: len(lines) for path, lines in memory.documents.items()}
    assert notes == {"memory/2023-05-01.md": 2, "memory/2023-05-02.md": 3, "memory/2023-05-03.md": 2}
    copy = memory.documents["memory/2023-05-02.md"][1]
    assert memory.evidence_of(copy) == {"D1:1"}
    assert memory.same_fact([memory.facts[0].text, copy])
    assert not memory.same_fact([memory.facts[0].text, memory.facts[1].text])
    assert plant_memory(FACTS, EVERY_FACT_TWICE).documents == memory.documents  # seeded, repeatable


def test_only_questions_with_evidence_among_the_facts_are_asked() -> None:
    memory = plant_memory(FACTS, NO_COPIES)
    asked = memory_questions(FACTS, memory)
    assert [(q.text, set(q.evidence)) for q in asked] == [
        ("When was the lighthouse painted?", {"D1:1"}),
        ("Which red kayak, which cat named Miso?", {"D1:2", "D2:1"}),
    ]


def test_the_pass_reads_vector_likeness_on_the_embedders_scale() -> None:
    # On e5-small's raw cosine, 0.92 joined most facts about one person into one merge.
    e5 = scale_for("intfloat/multilingual-e5-small")
    assert e5.raw(SEMANTIC_DUPLICATE) == pytest.approx(0.9776)
    assert e5.normalise(e5.raw(0.5)) == pytest.approx(0.5)
    assert scale_for("fake-embedding").raw(SEMANTIC_DUPLICATE) == SEMANTIC_DUPLICATE


@pytest.mark.django_db
def test_a_reviewed_consolidation_leaves_one_line_per_fact(fake_embeddings) -> None:
    run = run_memory_evaluation(samples=[FACTS], embedder=get_embedder(), planting=EVERY_FACT_TWICE)
    assert (run.before.entries, run.after.entries) == (7, 4)
    assert run.review.approved == run.review.proposed == 3 and run.copies_left == 0
    assert run.before.questions == run.after.questions == 2
    # The questions share words with their facts: every evidence turn is found, in any form.
    assert run.before.percent(run.before.at_k[10]) == run.after.percent(run.after.at_k[10]) == 100.0
    assert run.after.percent(run.after.in_budget) == 100.0
    decided = Proposal.objects.filter(state=Proposal.State.APPROVED)
    assert decided.count() == 3 and all(p.decided_note == "evaluation reviewer" for p in decided)


@pytest.mark.django_db
def test_the_reviewer_rejects_a_merge_of_two_different_facts(fake_embeddings) -> None:
    lookalikes = sample(
        [["Anna went to the park on Monday with her dog.", "D1:1"]],
        [["Anna went to the park on Sunday with her dog.", "D2:1"]],
    )
    run = run_memory_evaluation(samples=[lookalikes], embedder=get_embedder(), planting=NO_COPIES)
    assert (run.review.proposed, run.review.rejected, run.review.approved) == (1, 1, 0)
    assert run.before.entries == run.after.entries == 2


@pytest.mark.django_db
def test_the_command_prints_before_and_after_and_keeps_nothing(tmp_path, fake_embeddings) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([FACTS]))
    out = io.StringIO()
    call_command("eval_locomo_consolidation", str(path), "--embedder", "configured", stdout=out, verbosity=0)
    text = out.getvalue()
    assert "before" in text and "after" in text and "recall@10 (%)" in text
    assert "1 conversations (tiny)" in text
    assert not Team.objects.filter(slug__startswith="memory-eval-").exists()
