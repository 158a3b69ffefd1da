"""Precision and recall of consolidation proposals on the consolidation dev set.

docs/evaluation.md, Consolidation. Each case of `evaluation/data/consolidation_dev.json` is a
small memory (documents, the ones written from outside content marked untrusted) and the
proposals a careful person would make. Each case is loaded into a throwaway assistant, the
deterministic pass runs (and the model path, given a chat model), and a proposal counts as
correct when its kind and its set of cited lines match an expected one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_app.documents import Provenance, write_document
from memory_app.governance.consolidation import run_consolidation
from memory_app.governance.model_consolidation import run_model_pass
from memory_app.models import Proposal
from openclaw_site.models import Assistant, Team
from providers.chat import ChatModel

DEV_SET = Path(__file__).resolve().parent / "data" / "consolidation_dev.json"
Key = tuple[str, frozenset[tuple[str, int]]]


@dataclass
class Score:
    """Proposals made, expected and matched, overall and per expected kind."""

    proposed: int = 0
    expected: int = 0
    correct: int = 0
    discarded: int = 0  # model proposals the checks refused (and failed calls)
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [expected, found]

    @property
    def precision(self) -> float:
        return self.correct / self.proposed if self.proposed else 1.0

    @property
    def recall(self) -> float:
        return self.correct / self.expected if self.expected else 1.0

    def add(self, made: set[Key], wanted: set[Key]) -> None:
        self.proposed += len(made)
        self.expected += len(wanted)
        self.correct += len(made & wanted)
        for kind, sources in wanted:
            counts = self.by_kind.setdefault(kind, [0, 0])
            counts[0] += 1
            counts[1] += int((kind, sources) in made)

    def line(self, label: str) -> str:
        kinds = ", ".join(f"{kind} {found}/{total}" for kind, (total, found) in sorted(self.by_kind.items()))
        return (
            f"{label}: {self.proposed} proposed, {self.correct} correct of {self.expected} expected; "
            f"precision {self.precision:.2f}, recall {self.recall:.2f} ({kinds})"
        )


@dataclass(frozen=True)
class ModelPath:
    """A chat model to score the model path with; ``before_case`` runs before each memory's pass."""

    label: str
    model: ChatModel
    before_case: Callable[[dict[str, Any]], None] = lambda case: None


def load_cases(path: Path = DEV_SET) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["cases"])


def expected_keys(case: dict[str, Any]) -> set[Key]:
    return {
        (item["kind"], frozenset((path, int(line)) for path, line in item["sources"]))
        for item in case["expected"]
    }


def proposal_keys(proposals: Iterable[Proposal]) -> set[Key]:
    return {(p.kind, frozenset((s["path"], int(s["line"])) for s in p.sources)) for p in proposals}


def load_case(team: Team, case: dict[str, Any]) -> Assistant:
    """A throwaway assistant holding the case's documents (MEMORY.md a person's, notes the flush's)."""
    assistant = Assistant.objects.create(team=team, slug=f"case-{uuid.uuid4().hex[:10]}", name=case["name"])
    for path, content in case["documents"].items():
        if path in case["untrusted"]:
            provenance = Provenance(author="agent", untrusted=True, note="fetched")
        elif path == "MEMORY.md":
            provenance = Provenance(author="user", note="evaluation")
        else:
            provenance = Provenance(author="flush", note="evaluation")
        write_document(assistant=assistant, path=path, content=content, provenance=provenance)
    return assistant


def evaluate(
    cases: list[dict[str, Any]],
    *,
    model: ChatModel | None = None,
    paths: Sequence[ModelPath] = (),
    on_case: Callable[[str], None] | None = None,
) -> dict[str, Score]:
    """Score the deterministic pass and the model path with each model over the cases.

    ``model`` is scored under the label ``model``, each of ``paths`` under its own.
    """
    team = Team.objects.create(
        slug=f"consolidation-eval-{uuid.uuid4().hex[:8]}", name="Consolidation evaluation"
    )
    paths = [*paths, *([ModelPath("model", model)] if model is not None else [])]
    scores = {"deterministic": Score(), **{path.label: Score() for path in paths}}
    for case in cases:
        assistant = load_case(team, case)
        wanted = expected_keys(case)
        run_consolidation(assistant)
        scores["deterministic"].add(proposal_keys(Proposal.objects.filter(assistant=assistant)), wanted)
        for path in paths:
            Proposal.objects.filter(assistant=assistant).delete()
            path.before_case(case)
            outcome = run_model_pass(assistant, path.model)
            scores[path.label].add(proposal_keys(Proposal.objects.filter(assistant=assistant)), wanted)
            scores[path.label].discarded += len(outcome.discarded) + int(bool(outcome.error))
        if on_case is not None:
            on_case(case["name"])
    return scores
