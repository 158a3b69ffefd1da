"""The scripted model of the consolidation evaluation: the checks of the model path, measured.

docs/evaluation.md, Consolidation. A real OpenAI-protocol server on 127.0.0.1
(`tests.fake_openai`, a development dependency like the rest of `evaluation/`) answers each memory
of the dev set by calling the proposal tool with what a careful person would propose (the case's
expected proposals, a merge keeping its first line's text) plus planted faults: one of `FAULTS`
in turn, and for a memory holding fetched text the promotion of a fetched line. The model path
then runs unchanged (prompt, HTTP, the tool call's parsing, every check, filing), so the score
says what the checks let through: recall below 1 is a right proposal wrongly discarded,
precision below 1 a wrong one filed for a person to decide. It is no model's judgement; a real
model is measured when one is configured.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from evaluation.consolidation import ModelPath
from memory_app.governance.model_consolidation import TOOL_NAME
from memory_app.paths import ROOT_FILES
from providers.openai_chat import OpenAIChatModel
from tests.fake_openai import FakeOpenAI, tool_call_reply

Raw = dict[str, Any]
Case = dict[str, Any]


def _proposal(kind: str, sources: list[tuple[str, int]], new_text: str = "", **fields: Any) -> Raw:
    return {
        "kind": kind,
        "sources": [{"path": path, "line": line} for path, line in sources],
        "new_text": new_text,
        "target_path": fields.get("target_path", ""),
        "confidence": fields.get("confidence", 0.8),
        "rationale": fields.get("rationale", "scripted"),
    }


def _line(case: Case, path: str, line: int) -> str:
    return str(case["documents"][path].split("\n")[line - 1])


def careful_proposals(case: Case) -> list[Raw]:
    """The case's expected proposals as the tool's arguments (a merge keeps its first line)."""
    result = []
    for item in case["expected"]:
        sources = [(path, int(line)) for path, line in item["sources"]]
        new_text = item.get("new_text") or _line(case, *sources[0])
        result.append(
            _proposal(
                item["kind"], sources, new_text, target_path=item.get("target_path", ""), confidence=0.9
            )
        )
    return result


def _memory_lines(case: Case) -> list[tuple[str, int]]:
    lines = case["documents"]["MEMORY.md"].split("\n")
    return [("MEMORY.md", number) for number, text in enumerate(lines, start=1) if text.startswith("- ")]


def invented_source(case: Case) -> Raw:
    return _proposal("retire", [("MEMORY.md", len(case["documents"]["MEMORY.md"].split("\n")) + 5)])


def drops_too_much(case: Case) -> Raw:
    return _proposal("retire", _memory_lines(case))


def unlike_merge(case: Case) -> Raw:
    first, second = _memory_lines(case)[:2]
    return _proposal("merge", [first, second], _line(case, *first))


def confidence_out_of_range(case: Case) -> Raw:
    first = _memory_lines(case)[0]
    return _proposal("merge", [first, first], _line(case, *first), confidence=1.5)


def lone_supersede(case: Case) -> Raw:
    first = _memory_lines(case)[0]
    return _proposal("supersede", [first], _line(case, *first) + " (updated)")


def outside_target(case: Case) -> Raw:
    path = next(p for p in case["documents"] if p not in ROOT_FILES)
    return _proposal("promote", [(path, 1)], _line(case, path, 1), target_path="../outside.md")


def repeated(case: Case) -> Raw:
    """The first careful proposal once more (proposed before); an invented source without one."""
    proposals = careful_proposals(case)
    return proposals[0] if proposals else invented_source(case)


FAULTS: tuple[Callable[[Case], Raw], ...] = (
    invented_source,
    drops_too_much,
    unlike_merge,
    confidence_out_of_range,
    lone_supersede,
    outside_target,
    repeated,
)


def untrusted_promotions(case: Case) -> list[Raw]:
    """A promotion of each memory's first fetched line (never in the expected proposals)."""
    return [
        _proposal("promote", [(path, 1)], _line(case, path, 1), target_path="MEMORY.md")
        for path in case["untrusted"][:1]
    ]


def scripted_proposals(case: Case, index: int) -> list[Raw]:
    """What the scripted model answers for the ``index``-th memory."""
    fault = FAULTS[index % len(FAULTS)](case)
    return [*careful_proposals(case), fault, *untrusted_promotions(case)]


class ScriptedModel:
    """The fake server and a chat model pointed at it; `before_case` queues the next answer."""

    label = "scripted model"

    def __init__(self) -> None:
        self.server = FakeOpenAI()
        self.answered = 0
        self.planted = 0
        self.model: OpenAIChatModel | None = None

    def __enter__(self) -> ScriptedModel:
        self.server.start()
        self.model = OpenAIChatModel(
            base_url=self.server.base_url, api_key="scripted", model="scripted-consolidation", max_retries=0
        )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.server.stop()

    def path(self) -> ModelPath:
        """The model path to score with this model (started: inside ``with``)."""
        if self.model is None:
            raise RuntimeError("the scripted model is not started")
        return ModelPath(self.label, self.model, self.before_case)

    def before_case(self, case: Case) -> None:
        proposals = scripted_proposals(case, self.answered)
        self.planted += len(proposals) - len(case["expected"])
        self.answered += 1
        self.server.queue(tool_call_reply([(TOOL_NAME, {"proposals": proposals})]))
