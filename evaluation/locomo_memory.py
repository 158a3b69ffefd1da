"""LoCoMo recall of memory search before and after consolidating (`eval_locomo_consolidation`).

docs/evaluation.md, LoCoMo memory before and after consolidating. Each LoCoMo conversation
becomes an assistant's memory as the flush keeps it: one daily note per session date holding the
session's observations (LoCoMo's own model-written facts, each citing the turns it rests on) as
bullet lines. Duplicates are planted the way weeks of use make them: a later note repeats an
earlier fact (verbatim, reformatted, or with a word dropped) and a person keeps some facts in
MEMORY.md too. A question's evidence turns are found when a result holds a line stating a fact
that cites them (the fact itself or any copy of it).

Recall is measured on the memory as planted; then the deterministic consolidation pass runs, its
proposals are decided as a careful reviewer would (a merge is approved when its lines are copies
of one fact, rejected otherwise), the index is brought up to date and recall is measured again.
"""

from __future__ import annotations

import random
import re
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from evaluation.locomo import (
    RETRIEVAL_CATEGORIES,
    parse_session_date,
    refresh_statistics,
    session_numbers,
)
from evaluation.metrics import DEFAULT_BUDGET_CHARS, EvalCorpus, Hit, QueryVectors, read_within, search_method
from memory_app.documents import Provenance
from memory_app.documents import write_document as store_document
from memory_app.governance.consolidation import (
    NEAR_DUPLICATE,
    ProposalDecided,
    ProposalStale,
    approve_proposal,
    collect_entries,
    reject_proposal,
    run_consolidation,
)
from memory_app.governance.lines import normalise_line, similarity, split_lines
from memory_app.index.rebuild import reindex_assistant
from memory_app.models import Author, MemoryChunk, MemoryDocument, Proposal
from memory_app.search.hybrid import resolve_options
from openclaw_site.models import Assistant, Team
from providers.embeddings import Embedder

KS = (5, 10)
MAX_RESULTS = 20
# Words a rewording drops (one of them, when the line has one and stays a near duplicate).
FILLERS = ("really", "very", "also", "recently", "just", "the", "a", "an")
COPY_FORMS = ("verbatim", "reformatted", "reworded")
_DIA_ID_RE = re.compile(r"D\d+:\d+")
REVIEWER = Provenance(author=Author.USER, note="evaluation reviewer")


@dataclass(frozen=True)
class Planting:
    """How many duplicates to plant: the share of facts a later daily note repeats (at most
    ``within`` notes later), and the share a person also keeps in MEMORY.md."""

    repeat_share: float = 0.3
    within: int = 3
    memory_share: float = 0.1


@dataclass(frozen=True)
class Fact:
    """One LoCoMo observation as a memory line, with the dialogue turns it cites."""

    key: int
    text: str
    evidence: frozenset[str]


@dataclass
class PlantedMemory:
    """An assistant's documents, and which facts each line's normal form states."""

    documents: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    facts: list[Fact] = field(default_factory=list)
    keys_by_norm: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    copies: Counter[str] = field(default_factory=Counter)

    def add_line(self, path: str, text: str, fact: Fact) -> None:
        self.documents[path].append(text)
        self.keys_by_norm[normalise_line(text)].add(fact.key)

    def evidence_of(self, line: str) -> frozenset[str]:
        """The turns cited by the facts a line states (none for a line that states none)."""
        keys = self.keys_by_norm.get(normalise_line(line), ())
        return frozenset().union(*(self.facts[key].evidence for key in keys))

    def same_fact(self, texts: Iterable[str]) -> bool:
        """Whether every one of the lines states one same fact (a careful reviewer's test)."""
        keys = [self.keys_by_norm.get(normalise_line(text), set()) for text in texts]
        return bool(keys) and bool(set.intersection(*keys))


def dialogue_ids(value: Any) -> frozenset[str]:
    return frozenset(_DIA_ID_RE.findall(str(value)))


def session_facts(sample: dict[str, Any]) -> list[tuple[datetime, list[tuple[str, frozenset[str]]]]]:
    """Each session's date and observations (text, cited turns), in session order."""
    conversation = sample["conversation"]
    observations = sample.get("observation") or {}
    result = []
    for number in session_numbers(conversation):
        by_speaker = observations.get(f"session_{number}_observation") or {}
        rows = [
            (str(text).strip(), dialogue_ids(evidence))
            for items in by_speaker.values()
            for text, evidence in items
            if str(text).strip()
        ]
        result.append((parse_session_date(conversation.get(f"session_{number}_date_time", "")), rows))
    return result


def copy_of(text: str, form: str) -> str:
    """A copy of a fact line in one of `COPY_FORMS` (a rewording falls back to a reformatting)."""
    body = text.removeprefix("- ")
    if form == "verbatim":
        return text
    if form == "reworded":
        words = body.split(" ")
        for index, word in enumerate(words[1:-1], start=1):
            if word.lower() in FILLERS:
                reworded = "- " + " ".join(words[:index] + words[index + 1 :])
                if similarity(reworded, text) >= NEAR_DUPLICATE:
                    return reworded
    return "* " + body[:1].lower() + body[1:].rstrip(".")


def plant_memory(sample: dict[str, Any], planting: Planting) -> PlantedMemory:
    """The conversation's facts as daily notes and MEMORY.md, with duplicates planted."""
    rng = random.Random(str(sample.get("sample_id", "locomo")))
    memory = PlantedMemory()
    sessions = session_facts(sample)
    paths = [f"memory/{day:%Y-%m-%d}.md" for day, _ in sessions]
    repeats: dict[int, list[tuple[str, Fact]]] = defaultdict(list)
    kept: list[Fact] = []
    for index, (_, rows) in enumerate(sessions):
        for text, evidence in rows:
            fact = Fact(key=len(memory.facts), text=f"- {text}", evidence=evidence)
            memory.facts.append(fact)
            memory.add_line(paths[index], fact.text, fact)
            if index + 1 < len(sessions) and rng.random() < planting.repeat_share:
                later = rng.randint(index + 1, min(len(sessions) - 1, index + planting.within))
                repeats[later].append((rng.choice(COPY_FORMS), fact))
            if rng.random() < planting.memory_share:
                kept.append(fact)
        for form, fact in repeats.pop(index, []):
            memory.add_line(paths[index], copy_of(fact.text, form), fact)
            memory.copies[form] += 1
    for fact in kept:
        memory.add_line("MEMORY.md", fact.text, fact)
    memory.copies["in MEMORY.md"] += len(kept)
    return memory


def store(assistant: Assistant, memory: PlantedMemory) -> None:
    """Write the documents as their writers would: MEMORY.md a person's, the notes the flush's."""
    for path, lines in memory.documents.items():
        author = Author.USER if path == "MEMORY.md" else Author.FLUSH
        body = ["# Memory", *lines] if path == "MEMORY.md" else lines
        store_document(
            assistant=assistant,
            path=path,
            content="\n".join(body),
            provenance=Provenance(author=author, note="evaluation"),
        )


@dataclass(frozen=True)
class MemoryQuestion:
    text: str
    evidence: frozenset[str]  # the cited turns that some fact cites


def memory_questions(sample: dict[str, Any], memory: PlantedMemory) -> list[MemoryQuestion]:
    """The questions of categories 1-4 with evidence among the facts (that evidence only)."""
    cited = frozenset().union(*(fact.evidence for fact in memory.facts))
    result = []
    for qa in sample.get("qa") or []:
        if qa.get("category") not in RETRIEVAL_CATEGORIES:
            continue
        evidence = frozenset().union(*(dialogue_ids(item) for item in qa.get("evidence") or [])) & cited
        if evidence:
            result.append(MemoryQuestion(text=str(qa.get("question", "")), evidence=evidence))
    return result


@dataclass(frozen=True)
class Conversation:
    assistant: Assistant
    memory: PlantedMemory
    questions: list[MemoryQuestion]
    now: datetime


@dataclass
class Phase:
    """What one measurement saw: the memory's size and the mean recall over questions."""

    entries: int = 0
    chunks: int = 0
    questions: int = 0
    at_k: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    in_budget: float = 0.0

    def percent(self, total: float) -> float:
        return round(100 * total / self.questions, 1) if self.questions else 0.0


@dataclass
class Review:
    proposed: int = 0
    approved: int = 0
    rejected: int = 0
    stale: int = 0


@dataclass
class MemoryRun:
    conversations: list[str]
    facts: int
    copies: Counter[str]
    before: Phase
    after: Phase
    review: Review
    copies_left: int
    seconds: float


def _found(memory: PlantedMemory, lines: dict[str, list[str]], path: str, first: int, last: int) -> set[str]:
    document = lines.get(path, [])
    return set().union(
        *(memory.evidence_of(document[n - 1]) for n in range(first, last + 1) if n <= len(document))
    )


def _read(memory: PlantedMemory, lines: dict[str, list[str]], shown: Sequence[tuple[Hit, str]]) -> set[str]:
    found: set[str] = set()
    for hit, text in shown:
        document = lines.get(hit.path, [])
        for number in range(hit.snippet_start, min(hit.snippet_end, len(document)) + 1):
            line = document[number - 1]
            if line.strip() and line in text:
                found |= memory.evidence_of(line)
    return found


def measure(conversations: Sequence[Conversation], vectors: QueryVectors, *, budget: int) -> Phase:
    """Ask every question of the assistants' memory with the default hybrid search."""
    refresh_statistics()
    phase = Phase()
    for conversation in conversations:
        assistant = conversation.assistant
        lines = {
            path: split_lines(content)
            for path, content in MemoryDocument.objects.filter(assistant=assistant).values_list(
                "path", "content"
            )
        }
        phase.entries += len(collect_entries(assistant))
        phase.chunks += MemoryChunk.objects.filter(assistant=assistant).count()
        options = replace(resolve_options(assistant, max_results=MAX_RESULTS), explain=True)
        corpus = EvalCorpus(assistant=assistant, questions=[], now=conversation.now)
        search = search_method("hybrid", corpus=corpus, options=options, embedder=vectors.embedder)
        for question in conversation.questions:
            hits = search.run(question.text, vectors.get(question.text))
            for k in KS:
                found = set().union(
                    *(_found(conversation.memory, lines, h.path, h.start_line, h.end_line) for h in hits[:k])
                )
                phase.at_k[k] += len(found & question.evidence) / len(question.evidence)
            read = _read(conversation.memory, lines, read_within(hits, budget))
            phase.in_budget += len(read & question.evidence) / len(question.evidence)
            phase.questions += 1
    return phase


def review(conversations: Sequence[Conversation]) -> Review:
    """Run the deterministic pass and decide each proposal as a careful reviewer would."""
    outcome = Review()
    for conversation in conversations:
        run_consolidation(conversation.assistant)
        proposals = Proposal.objects.filter(assistant=conversation.assistant, state=Proposal.State.OPEN)
        for proposal in proposals.order_by("pk"):
            outcome.proposed += 1
            texts = [source["text"] for source in proposal.sources]
            try:
                if conversation.memory.same_fact(texts):
                    approve_proposal(proposal, provenance=REVIEWER)
                    outcome.approved += 1
                else:
                    reject_proposal(proposal, provenance=REVIEWER)
                    outcome.rejected += 1
            except (ProposalStale, ProposalDecided):
                outcome.stale += 1
        reindex_assistant(conversation.assistant.pk)
    return outcome


def copies_left(conversations: Sequence[Conversation]) -> int:
    """How many lines beyond one per fact still state a fact (planted copies not merged)."""
    left = 0
    for conversation in conversations:
        stated: Counter[int] = Counter()
        for entry in collect_entries(conversation.assistant):
            for key in conversation.memory.keys_by_norm.get(entry.norm, ()):
                stated[key] += 1
        left += sum(count - 1 for count in stated.values() if count > 1)
    return left


def load(team: Team, sample: dict[str, Any], planting: Planting) -> Conversation:
    """A throwaway assistant holding the conversation's planted memory, indexed."""
    memory = plant_memory(sample, planting)
    assistant = Assistant.objects.create(
        team=team, slug=f"memory-{uuid.uuid4().hex[:10]}", name=f"LoCoMo memory {sample.get('sample_id')}"
    )
    store(assistant, memory)
    reindex_assistant(assistant.pk)
    sessions = session_facts(sample)
    return Conversation(
        assistant=assistant,
        memory=memory,
        questions=memory_questions(sample, memory),
        now=max(day for day, _ in sessions),
    )


def run_memory_evaluation(
    *,
    samples: Sequence[dict[str, Any]],
    embedder: Embedder,
    budget: int = DEFAULT_BUDGET_CHARS,
    planting: Planting = Planting(),
    progress: Callable[[str], None] = lambda _: None,
) -> MemoryRun:
    """Plant, measure, consolidate and review, measure again; the caller rolls it all back."""
    started = time.perf_counter()
    team = Team.objects.create(slug=f"memory-eval-{uuid.uuid4().hex[:8]}", name="LoCoMo memory evaluation")
    conversations = []
    for sample in samples:
        conversations.append(load(team, sample, planting))
        progress(f"planted {sample.get('sample_id')} ({time.perf_counter() - started:.0f}s)")
    vectors = QueryVectors(embedder)
    before = measure(conversations, vectors, budget=budget)
    progress(f"measured before ({time.perf_counter() - started:.0f}s)")
    decided = review(conversations)
    progress(f"consolidated and reviewed ({time.perf_counter() - started:.0f}s)")
    after = measure(conversations, vectors, budget=budget)
    copies: Counter[str] = Counter()
    for conversation in conversations:
        copies.update(conversation.memory.copies)
    return MemoryRun(
        conversations=[str(s.get("sample_id", "")) for s in samples],
        facts=sum(len(c.memory.facts) for c in conversations),
        copies=copies,
        before=before,
        after=after,
        review=decided,
        copies_left=copies_left(conversations),
        seconds=time.perf_counter() - started,
    )


def report(run: MemoryRun, *, budget: int) -> list[str]:
    """The figures before and after, side by side."""
    planted = sum(run.copies.values())
    forms = ", ".join(f"{run.copies[form]} {form}" for form in (*COPY_FORMS, "in MEMORY.md"))
    rows = [
        ("memory entries", run.before.entries, run.after.entries),
        ("index chunks", run.before.chunks, run.after.chunks),
        *[
            (f"recall@{k} (%)", run.before.percent(run.before.at_k[k]), run.after.percent(run.after.at_k[k]))
            for k in KS
        ],
        (
            f"recall within {budget} characters (%)",
            run.before.percent(run.before.in_budget),
            run.after.percent(run.after.in_budget),
        ),
    ]
    width = max(len(label) for label, _, _ in rows)
    decided = run.review
    return [
        f"LoCoMo memory before and after consolidating: {len(run.conversations)} conversations "
        f"({', '.join(run.conversations)}), {run.facts} facts in daily notes, {planted} planted copies "
        f"({forms}); {run.before.questions} questions of categories 1-4 with evidence among the facts",
        f"consolidation (deterministic pass): {decided.proposed} merges proposed, {decided.approved} approved "
        f"and {decided.rejected} rejected by the reviewer, {decided.stale} stale; "
        f"{run.copies_left} copies left of {planted} ({run.seconds:.0f}s)",
        f"{'hybrid search':<{width}}  {'before':>8}  {'after':>8}",
        *[f"{label:<{width}}  {before:>8}  {after:>8}" for label, before, after in rows],
    ]
