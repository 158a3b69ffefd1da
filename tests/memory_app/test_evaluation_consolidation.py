"""The consolidation evaluation (docs/evaluation.md, Consolidation): the dev set is well formed, the
deterministic pass is scored on it without a model, the model path against the scripted server,
and `eval_consolidation` prints every path it measured."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from evaluation.consolidation import evaluate, expected_keys, load_cases
from evaluation.scripted_model import FAULTS, ScriptedModel, scripted_proposals
from memory_app.governance.model_consolidation import TOOL_NAME
from openclaw_site.models import Team
from providers.chat import get_chat_model
from tests.fake_openai import tool_call_reply


def test_the_dev_set_has_forty_memories_and_every_kind_of_case() -> None:
    cases = load_cases()
    assert len(cases) >= 40 and len({case["name"] for case in cases}) == len(cases)
    kinds = {item["kind"] for case in cases for item in case["expected"]}
    assert kinds == {"merge", "supersede", "promote"}
    assert any(not case["expected"] for case in cases) and any(case["untrusted"] for case in cases)
    for case in cases:
        for _, sources in expected_keys(case):
            for path, line in sources:
                assert 1 <= line <= len(case["documents"][path].split("\n")), case["name"]


@pytest.mark.django_db
def test_the_deterministic_pass_finds_the_duplicates_without_a_model(no_llm) -> None:
    scores = evaluate(load_cases(), model=None)
    deterministic = scores["deterministic"]
    merges_expected, merges_found = deterministic.by_kind["merge"]
    assert merges_found == merges_expected  # every planted duplicate and near-duplicate
    assert deterministic.by_kind["supersede"][1] == 0 and deterministic.by_kind["promote"][1] == 0
    assert deterministic.precision >= 0.8  # look-alike contradictions are proposed as merges
    assert "precision" in deterministic.line("deterministic pass")


@pytest.mark.django_db
def test_the_model_path_is_scored_with_the_scripted_model(llm) -> None:
    cases = [
        case for case in load_cases() if case["name"] in ("contradiction-1", "durable-fact-1", "clean-1")
    ]
    for case in cases:  # the model answers each case with what a careful person would propose...
        proposals = [
            {
                "kind": item["kind"],
                "sources": [{"path": path, "line": line} for path, line in item["sources"]],
                "new_text": item.get("new_text", ""),
                "target_path": item.get("target_path", ""),
                "confidence": 0.9,
                "rationale": "scripted",
            }
            for item in case["expected"]
        ]
        if case["name"] == "clean-1":  # ...except here, where it invents a source
            proposals = [{**json.loads(json.dumps(p)), "kind": "retire"} for p in proposals] or [
                {
                    "kind": "retire",
                    "sources": [{"path": "MEMORY.md", "line": 40}],
                    "new_text": "",
                    "target_path": "",
                    "confidence": 0.5,
                    "rationale": "scripted",
                }
            ]
        llm.queue(tool_call_reply([(TOOL_NAME, {"proposals": proposals})]))
    scores = evaluate(cases, model=get_chat_model())
    model = scores["model"]
    assert (model.proposed, model.correct, model.expected) == (2, 2, 2)
    assert model.precision == 1.0 and model.recall == 1.0


@pytest.mark.django_db
def test_the_checks_keep_every_careful_proposal_and_refuse_every_planted_fault(no_llm) -> None:
    cases = load_cases()
    with ScriptedModel() as scripted:
        scores = evaluate(cases, paths=[scripted.path()])
    score = scores[ScriptedModel.label]
    fetched = sum(1 for case in cases if case["untrusted"])
    assert score.correct == score.expected == 38  # no right proposal is discarded
    assert scripted.planted == len(cases) + fetched
    assert score.discarded == len(cases)  # every fault of FAULTS is refused...
    assert score.proposed - score.correct == fetched  # ...a fetched line's promotion waits for a person


def test_each_planted_fault_is_one_the_checks_name() -> None:
    case = next(case for case in load_cases() if case["name"] == "contradiction-1")
    faults = [scripted_proposals(case, index)[-1] for index in range(len(FAULTS))]
    assert [fault["kind"] for fault in faults] == [
        "retire",
        "retire",
        "merge",
        "merge",
        "supersede",
        "promote",
        "supersede",  # the careful proposal once more
    ]


@pytest.mark.django_db
def test_the_command_scores_the_scripted_and_the_configured_model(llm) -> None:
    out = io.StringIO()
    call_command("eval_consolidation", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("deterministic pass: ")
    assert lines[2].startswith("model path, scripted model: 40 proposed, 38 correct of 38 expected")
    # The configured model (the fake server answering text) calls no tool: every memory's call fails.
    assert lines[3].startswith("model path, model fake-chat: 0 proposed") and "45 discarded" in lines[3]
    assert not Team.objects.filter(slug__startswith="consolidation-eval-").exists()


@pytest.mark.django_db
def test_without_a_configured_model_the_command_says_so(no_llm) -> None:
    out = io.StringIO()
    call_command("eval_consolidation", "--no-scripted", stdout=out)
    assert out.getvalue().splitlines()[-1].startswith("model path, configured model: none configured")
