"""Loading a LoCoMo conversation into an assistant, for the retrieval evaluation (`eval_locomo`).

LoCoMo (Maharana et al., ACL 2024; docs/evaluation.md describes the file) is a list of conversations:
`conversation` holds `speaker_a`, `speaker_b` and sessions `session_N` (turns `{speaker, dia_id,
text}`, some with an image's `blip_caption`) dated by `session_N_date_time` ("1:56 pm on 8 May,
2023"); `qa` holds questions with the `dia_id`s of their evidence turns and a category.

Each session becomes a `Session` whose turns are appended through `append_messages` (speaker_a as
the user, speaker_b as the assistant, a few seconds apart from the session's date), and is indexed
through the same path a live transcript takes (`sessions_app.indexing.index_session_transcript`).
An evidence turn is then known by what search results cite: the session's path and the message
``seq``, plus the line the transcript renders for it.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Avg
from django.db.models.functions import Length
from django.utils.text import slugify

from evaluation.metrics import (
    DEFAULT_BUDGET_CHARS,
    DEFAULT_KS,
    SEARCH_VARIANTS,
    EvalCorpus,
    EvalQuestion,
    EvidenceTurn,
    QueryVectors,
    evaluate,
)
from memory_app.index.rebuild import reindex_assistant
from memory_app.models import MemoryChunk
from memory_app.search.candidates import forget_lexeme_stats
from memory_app.search.hybrid import resolve_options
from openclaw_site.models import Assistant, Team
from openclaw_site.teams.assistant_settings import validate_settings
from openclaw_site.teams.settings_document import SettingsDocument
from providers.embeddings import Embedder
from sessions_app.indexing import index_session_transcript, session_path, transcript_lines
from sessions_app.messages import MessageInput
from sessions_app.models import Message, Session
from sessions_app.transcript import append_messages

# Turns of one session are this far apart, starting at the session's date.
TURN_SPACING_SECONDS = 5
# Categories whose answers are in the conversation (5 is adversarial: no evidence to retrieve).
RETRIEVAL_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

_SESSION_KEY_RE = re.compile(r"^session_(\d+)$")
_DATE_RE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_MONTHS = {
    name: index
    for index, name in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        start=1,
    )
}
# Evidence ids are "D<session>:<turn>"; a few entries in the data set hold two ids in one string.
_DIA_ID_RE = re.compile(r"D\d+:\d+")


class LocomoFormatError(ValueError):
    """The file is not in LoCoMo's format; the message says where."""


@dataclass(frozen=True)
class LoadedConversation:
    sample_id: str
    assistant: Assistant
    sessions: int
    turns: dict[str, EvidenceTurn]  # by dia_id
    end: datetime  # the last turn's time: "now" for temporal decay


def parse_session_date(value: str) -> datetime:
    """Return the UTC time of a `session_N_date_time` such as "1:56 pm on 8 May, 2023"."""
    match = _DATE_RE.match(value or "")
    if match is None or match.group(5).lower() not in _MONTHS:
        raise LocomoFormatError(f"unreadable session date {value!r}")
    hour, minute, half, day, month, year = match.groups()
    hour24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), _MONTHS[month.lower()], int(day), hour24, int(minute), tzinfo=UTC)


def session_numbers(conversation: dict[str, Any]) -> list[int]:
    """Return the numbers N of the `session_N` entries that hold turns, in order."""
    numbers = [int(m.group(1)) for key in conversation if (m := _SESSION_KEY_RE.match(key))]
    return sorted(n for n in numbers if conversation.get(f"session_{n}"))


def turn_content(turn: dict[str, Any]) -> str:
    """Return a turn's message text; a shared image keeps its caption, as the model would see it."""
    text = str(turn.get("text") or "").strip()
    caption = str(turn.get("blip_caption") or "").strip()
    return f"{text} [image: {caption}]" if caption else text


def turn_messages(turns: Sequence[dict[str, Any]], *, speaker_a: str, start: datetime) -> list[MessageInput]:
    """Return a session's turns as messages: speaker_a is the user, anyone else the assistant."""
    messages = []
    for index, turn in enumerate(turns):
        role = "user" if turn.get("speaker") == speaker_a else "assistant"
        messages.append(
            MessageInput(
                role=role,
                content=turn_content(turn),
                created_at=start + timedelta(seconds=index * TURN_SPACING_SECONDS),
            )
        )
    return messages


def load_conversation(
    *, assistant: Assistant, sample: dict[str, Any], index: bool = True
) -> LoadedConversation:
    """Store every session of a LoCoMo sample in ``assistant`` and index the transcripts."""
    conversation = _field(sample, "conversation", dict)
    speaker_a = _field(conversation, "speaker_a", str)
    turns: dict[str, EvidenceTurn] = {}
    end = None
    numbers = session_numbers(conversation)
    for number in numbers:
        start = parse_session_date(conversation.get(f"session_{number}_date_time", ""))
        session_turns = _field(conversation, f"session_{number}", list)
        session = Session.objects.create(
            assistant=assistant,
            key=f"{sample.get('sample_id', 'locomo')}-s{number}",
            title=f"Session {number}",
        )
        rows = append_messages(
            session_id=session.pk, messages=turn_messages(session_turns, speaker_a=speaker_a, start=start)
        )
        turns.update(_evidence_turns(session, session_turns, rows))
        end = rows[-1].created_at if rows else end
        if index:
            index_session_transcript(session.pk)
    if end is None:
        raise LocomoFormatError(f"sample {sample.get('sample_id')!r} has no sessions")
    return LoadedConversation(
        sample_id=str(sample.get("sample_id", "")),
        assistant=assistant,
        sessions=len(numbers),
        turns=turns,
        end=end,
    )


def _evidence_turns(
    session: Session, turns: Sequence[dict[str, Any]], rows: Sequence[Message]
) -> dict[str, EvidenceTurn]:
    """Map each turn's dia_id to the path, seq and rendered line that search results cite."""
    path = session_path(session)
    result = {}
    for turn, row in zip(turns, rows):
        rendered = transcript_lines([row])
        if turn.get("dia_id") and rendered.lines:
            result[str(turn["dia_id"])] = EvidenceTurn(path=path, line=row.seq, text=rendered.lines[0])
    return result


def questions(
    sample: dict[str, Any],
    turns: dict[str, EvidenceTurn],
    *,
    categories: Iterable[int] = RETRIEVAL_CATEGORIES,
) -> tuple[list[EvalQuestion], int]:
    """Return the sample's questions of ``categories`` with their evidence turns, and how many
    were skipped because none of their evidence ids names a turn."""
    wanted = set(categories)
    kept, skipped = [], 0
    for qa in _field(sample, "qa", list):
        if qa.get("category") not in wanted:
            continue
        ids = [dia_id for entry in qa.get("evidence") or [] for dia_id in _DIA_ID_RE.findall(str(entry))]
        evidence = tuple(dict.fromkeys(turns[i] for i in ids if i in turns))
        if not evidence:
            skipped += 1
            continue
        kept.append(
            EvalQuestion(text=str(qa.get("question", "")), category=int(qa["category"]), evidence=evidence)
        )
    return kept, skipped


def _field(data: dict[str, Any], key: str, kind: type) -> Any:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, kind):
        raise LocomoFormatError(f"expected {key!r} to be a {kind.__name__}")
    return value


# --- the evaluation run -----------------------------------------------------------------------


@dataclass(frozen=True)
class EvalConfig:
    """One cell of the comparison grid: `memorySearch` chunking and query settings, and a label."""

    label: str
    chunking: dict[str, Any]
    query: dict[str, Any]

    def settings(self) -> SettingsDocument:
        """Return the assistant settings of this cell (validated by `validate_settings`)."""
        return validate_settings({"memorySearch": {"chunking": self.chunking, "query": self.query}})


@dataclass
class EvalRun:
    """What `run_evaluation` measured: per config, every method's summary."""

    conversations: list[str]
    questions: int
    skipped_questions: int
    messages: int
    configs: list[dict[str, Any]] = field(default_factory=list)


def run_evaluation(
    *,
    samples: Sequence[dict[str, Any]],
    configs: Sequence[EvalConfig],
    embedder: Embedder,
    max_results: int,
    budget: int = DEFAULT_BUDGET_CHARS,
    ks: Sequence[int] = DEFAULT_KS,
    variants: Sequence[str] = tuple(SEARCH_VARIANTS),
    progress: Callable[[str], None] = lambda _: None,
) -> EvalRun:
    """Load the samples into fresh assistants of a new team, then evaluate every config on them.

    The caller owns the transaction: `eval_locomo` rolls it all back afterwards.
    """
    if not configs:
        raise ValueError("no configuration to evaluate")
    team = Team.objects.create(slug=f"locomo-eval-{uuid.uuid4().hex[:8]}", name="LoCoMo evaluation")
    corpora, skipped, messages = [], 0, 0
    for sample in samples:
        started = time.perf_counter()
        assistant = Assistant.objects.create(
            team=team, slug=_slug(sample), name=f"LoCoMo {_slug(sample)}", settings=configs[0].settings()
        )
        loaded = load_conversation(assistant=assistant, sample=sample)
        asked, missing = questions(sample, loaded.turns)
        corpora.append(EvalCorpus(assistant=assistant, questions=asked, now=loaded.end))
        skipped, messages = skipped + missing, messages + len(loaded.turns)
        progress(
            f"loaded {loaded.sample_id}: {loaded.sessions} sessions, {len(loaded.turns)} turns, "
            f"{len(asked)} questions ({time.perf_counter() - started:.0f}s)"
        )
    run = EvalRun(
        conversations=[_slug(s) for s in samples],
        questions=sum(len(c.questions) for c in corpora),
        skipped_questions=skipped,
        messages=messages,
    )
    vectors = QueryVectors(embedder)
    for config in configs:
        run.configs.append(
            _evaluate_config(
                config,
                corpora,
                vectors,
                max_results=max_results,
                budget=budget,
                ks=ks,
                variants=variants,
                progress=progress,
            )
        )
    return run


def _evaluate_config(
    config: EvalConfig,
    corpora: Sequence[EvalCorpus],
    vectors: QueryVectors,
    *,
    max_results: int,
    budget: int,
    ks: Sequence[int],
    variants: Sequence[str],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    started = time.perf_counter()
    for corpus in corpora:
        _apply(corpus.assistant, config)
    refresh_statistics()
    chunks = MemoryChunk.objects.filter(assistant__in=[c.assistant for c in corpora])
    stats = {
        "chunks": chunks.count(),
        "mean_chunk_chars": round(chunks.aggregate(mean=Avg(Length("text")))["mean"] or 0),
    }
    progress(
        f"[{config.label}] indexed: {stats['chunks']} chunks, {stats['mean_chunk_chars']} characters "
        f"on average ({time.perf_counter() - started:.0f}s)"
    )
    options = resolve_options(corpora[0].assistant, max_results=max_results)
    started = time.perf_counter()
    scores = evaluate(corpora, options=options, vectors=vectors, ks=ks, budget=budget, variants=variants)
    progress(f"[{config.label}] evaluated ({time.perf_counter() - started:.0f}s)")
    return {
        "label": config.label,
        "settings": {"chunking": config.chunking, "query": config.query},
        "max_results": max_results,
        "budget_chars": budget,
        **stats,
        "methods": [s.summary(ks) for s in scores],
    }


def _apply(assistant: Assistant, config: EvalConfig) -> None:
    """Give the assistant the config's settings and bring its index up to date (a new chunking
    builds a new generation through the real reindex path)."""
    assistant.settings = config.settings()
    assistant.save(update_fields=["settings"])
    reindex_assistant(assistant.pk)


def refresh_statistics() -> None:
    """ANALYZE the chunk table, as autovacuum would after a load (the text side reads the lexeme
    statistics, `candidates.lexeme_stats`); inside the evaluation's transaction it sees the
    loaded rows and is rolled back with them."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_app_memorychunk")
    forget_lexeme_stats()


def _slug(sample: dict[str, Any]) -> str:
    return slugify(str(sample.get("sample_id") or "locomo"))[:50] or "locomo"
