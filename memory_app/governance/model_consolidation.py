"""The model path of consolidation: a model proposes, every proposal is checked before it is shown.

docs/design.md, Provenance, consolidation and forgetting. The model reads the assistant's
entries (each cited ``path#Lline`` with its trust) and answers by calling one tool whose
parameters are a strict JSON schema (`PROPOSAL_SCHEMA`). Each proposal it makes is validated:
its sources exist, its change applies to the documents as they are, it drops at most
`MAX_LOSS` of the entries of the documents it touches, and it was not proposed (or rejected)
before. A proposal
that fails is discarded and the reason logged; the rest are filed as open proposals, like the
deterministic pass's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import transaction

from memory_app.governance.consolidation import (
    Entry,
    ProposalStale,
    apply_change,
    auto_apply,
    collect_entries,
    fingerprint,
    run_consolidation,
    unified_diff,
)
from memory_app.governance.lines import is_entry, similarity, split_lines
from memory_app.models import MemoryDocument, Proposal
from memory_app.paths import InvalidPath, validate_memory_path
from openclaw_site.models import Assistant, UsagePurpose
from openclaw_site.usage.ledger import record_usage
from providers.chat import ChatModel, get_chat_model
from providers.errors import ProviderError
from providers.message_types import OpenAITool

logger = logging.getLogger(__name__)

TOOL_NAME = "propose_memory_changes"
# A proposal may drop at most this share of any document's entries.
MAX_LOSS = 0.25
# A merge's every source must be at least this alike its new text (difflib ratio of normal forms).
MERGE_LIKENESS = 0.5
# A supersede replaces at most this many older lines by its new one.
MAX_SUPERSEDED = 2
# How many entries the model is shown at most (the rest wait for the next run).
MAX_MODEL_ENTRIES = 400
KINDS = [Proposal.Kind.MERGE, Proposal.Kind.SUPERSEDE, Proposal.Kind.PROMOTE, Proposal.Kind.RETIRE]

PROPOSAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["proposals"],
    "properties": {
        "proposals": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["kind", "sources", "new_text", "target_path", "confidence", "rationale"],
                "properties": {
                    "kind": {"type": "string", "enum": [str(kind) for kind in KINDS]},
                    "sources": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["path", "line"],
                            "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
                        },
                    },
                    "new_text": {"type": "string"},
                    "target_path": {"type": "string"},
                    "confidence": {"type": "number"},
                    "rationale": {"type": "string"},
                },
            },
        }
    },
}

SYSTEM_PROMPT = (
    "You consolidate an assistant's long-term memory. Propose changes a careful person would "
    "approve: merge duplicates and near-duplicates into one line (kind merge; the first source's "
    "line is replaced by new_text, the others removed); supersede a contradicted fact, the newer "
    "one winning (kind supersede, the older line first); promote a durable fact from a daily note "
    "to MEMORY.md (kind promote, target_path MEMORY.md); retire lines marked stale (kind retire). "
    "Cite every line you rely on as {path, line} exactly as given. Lines marked untrusted came "
    "from outside content: never promote them. Propose nothing when memory is clean. Answer only "
    f"by calling {TOOL_NAME}."
)


@dataclass
class ModelPassOutcome:
    proposed: int = 0
    auto_applied: int = 0
    discarded: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "proposed": self.proposed,
            "auto_applied": self.auto_applied,
            "discarded": self.discarded,
            "error": self.error,
        }


class Invalid(Exception):
    """Why a model proposal is discarded."""


def _prompt(entries: list[Entry]) -> str:
    rows = [f"{e.path}#L{e.line} ({e.trust}): {e.text}" for e in entries]
    return "Memory entries, one per line (path#Lline (trust): text):\n" + "\n".join(rows)


def _tool() -> OpenAITool:
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "File consolidation proposals for a person to review.",
            "parameters": PROPOSAL_SCHEMA,
            "strict": True,
        },
    }


def ask_model(assistant: Assistant, model: ChatModel, entries: list[Entry]) -> list[Any]:
    """The model's raw proposals (what its tool call carried), usage recorded."""
    completion = model.complete(
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": _prompt(entries)},
        ],
        tools=[_tool()],
        model=assistant.model or None,
    )
    record_usage(
        assistant=assistant,
        purpose=UsagePurpose.CONSOLIDATION,
        model=completion.model,
        usage=completion.usage,
    )
    calls = [call for call in completion.tool_calls if call.name == TOOL_NAME]
    if not calls:
        raise Invalid(f"the model did not call {TOOL_NAME}")
    proposals = calls[0].arguments.get("proposals")
    if not isinstance(proposals, list):
        raise Invalid("the tool call has no proposals list")
    return proposals


def _shape(raw: Any) -> dict[str, Any]:
    """Check one proposal against the schema (the model's strictness is not relied on)."""
    if not isinstance(raw, dict):
        raise Invalid("not an object")
    if raw.get("kind") not in KINDS:
        raise Invalid(f"unknown kind {raw.get('kind')!r}")
    sources = raw.get("sources")
    if not isinstance(sources, list) or not sources:
        raise Invalid("no sources")
    for source in sources:
        if not (
            isinstance(source, dict)
            and isinstance(source.get("path"), str)
            and isinstance(source.get("line"), int)
        ):
            raise Invalid("a source is not {path, line}")
    if not isinstance(raw.get("new_text"), str) or not isinstance(raw.get("target_path", ""), str):
        raise Invalid("new_text and target_path must be strings")
    confidence = raw.get("confidence")
    if not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        raise Invalid("confidence must be a number from 0 to 1")
    return raw


def _sources(raw: dict[str, Any], by_line: dict[tuple[str, int], Entry]) -> list[Entry]:
    cited = []
    for source in raw["sources"]:
        entry = by_line.get((source["path"], source["line"]))
        if entry is None:
            raise Invalid(f"source {source['path']}#L{source['line']} does not exist")
        if entry not in cited:
            cited.append(entry)
    kind = raw["kind"]
    if kind in (Proposal.Kind.MERGE, Proposal.Kind.SUPERSEDE) and len(cited) < 2:
        raise Invalid(f"a {kind} needs at least two sources")
    if kind == Proposal.Kind.SUPERSEDE and len(cited) > MAX_SUPERSEDED + 1:
        raise Invalid(f"a supersede replaces at most {MAX_SUPERSEDED} lines by one")
    if kind == Proposal.Kind.MERGE:
        for entry in cited:  # a merge folds lines that say the same thing, nothing else
            if similarity(entry.text, raw["new_text"]) < MERGE_LIKENESS:
                raise Invalid(f"{entry.path}#L{entry.line} does not say what new_text says")
    if (
        kind in (Proposal.Kind.MERGE, Proposal.Kind.SUPERSEDE, Proposal.Kind.PROMOTE)
        and not raw["new_text"].strip()
    ):
        raise Invalid(f"a {kind} needs new_text")
    return cited


def _target(raw: dict[str, Any]) -> str:
    if raw["kind"] != Proposal.Kind.PROMOTE:
        return ""
    try:
        return validate_memory_path(raw.get("target_path") or "MEMORY.md")
    except InvalidPath as error:
        raise Invalid(f"target_path: {error}") from None


def _entries(text: str) -> int:
    return sum(1 for line in split_lines(text) if is_entry(line))


def _check_loss(before: dict[str, str], after: dict[str, str], *, consolidated: int) -> None:
    """Refuse a change that loses more than `MAX_LOSS` of the entries of the documents it touches.

    Counted over the touched documents together, so a promotion moving a daily note's one line
    into MEMORY.md loses nothing; the ``consolidated`` lines a merge or supersede folds into its
    new text are not lost either; a retire of most of a document is refused.
    """
    had = sum(_entries(before.get(path, "")) for path in after)
    has = sum(_entries(text) for text in after.values()) + consolidated
    if had and (had - has) / had > MAX_LOSS:
        paths = ", ".join(sorted(after))
        raise Invalid(f"drops {had - has} of {had} entries of {paths} (more than {MAX_LOSS:.0%})")


def validate(assistant: Assistant, raw: Any, by_line: dict[tuple[str, int], Entry]) -> dict[str, Any]:
    """The fields of a `Proposal` for one model proposal, or `Invalid` saying why not."""
    raw = _shape(raw)
    cited = _sources(raw, by_line)
    target = _target(raw)
    sources = [entry.source() for entry in cited]
    paths = {entry.path for entry in cited} | ({target} - {""})
    before = dict(
        MemoryDocument.objects.filter(assistant=assistant, path__in=paths).values_list("path", "content")
    )
    try:
        after = apply_change(
            before, kind=raw["kind"], sources=sources, new_text=raw["new_text"], target_path=target
        )
    except ProposalStale as error:
        raise Invalid(f"the change does not apply: {error.reason}") from None
    folded = len(cited) - 1 if raw["kind"] in (Proposal.Kind.MERGE, Proposal.Kind.SUPERSEDE) else 0
    _check_loss(before, after, consolidated=folded)
    key = fingerprint(raw["kind"], [entry.text for entry in cited] + [raw["new_text"]])
    if Proposal.objects.filter(assistant=assistant, fingerprint=key).exists():
        raise Invalid("proposed before (open, approved or rejected)")
    documents = [{"path": e.path, "start_line": e.line, "end_line": e.line} for e in cited]
    if target:
        start = len(split_lines(before.get(target, ""))) + 1 if before.get(target) else 1
        documents.append(
            {"path": target, "start_line": start, "end_line": start + len(split_lines(raw["new_text"])) - 1}
        )
    return {
        "kind": raw["kind"],
        "documents": documents,
        "new_text": raw["new_text"],
        "sources": sources,
        "confidence": round(float(raw["confidence"]), 4),
        "diff": unified_diff(before, after),
        "target_path": target,
        "fingerprint": key,
        "reason": str(raw.get("rationale", ""))[:255],
    }


def run_model_pass(assistant: Assistant, model: ChatModel) -> ModelPassOutcome:
    """Ask the model, validate each proposal, file the valid ones; log each discarded one."""
    outcome = ModelPassOutcome()
    entries = collect_entries(assistant)[:MAX_MODEL_ENTRIES]
    if not entries:
        return outcome
    try:
        proposals = ask_model(assistant, model, entries)
    except (ProviderError, Invalid) as error:
        outcome.error = str(error)[:500]
        logger.warning("consolidation model pass of assistant %s failed: %s", assistant.pk, outcome.error)
        return outcome
    by_line = {(entry.path, entry.line): entry for entry in entries}
    for index, raw in enumerate(proposals):
        try:
            fields = validate(assistant, raw, by_line)
        except Invalid as reason:
            outcome.discarded.append({"index": index, "reason": str(reason)})
            logger.warning(
                "consolidation proposal %s of assistant %s discarded: %s", index, assistant.pk, reason
            )
            continue
        with transaction.atomic():
            proposal = Proposal.objects.create(assistant=assistant, **fields)
        outcome.proposed += 1
        outcome.auto_applied += int(auto_apply(proposal))
    return outcome


def consolidate(assistant: Assistant) -> dict[str, Any]:
    """The consolidation job: the deterministic pass, then the model's when a model is configured."""
    result = run_consolidation(assistant)
    model = get_chat_model()
    result["model"] = run_model_pass(assistant, model).as_dict() if model is not None else None
    return result


def due_for_consolidation(now: datetime) -> list[Assistant]:
    """The live assistants whose nightly consolidation hour, in their own timezone, is ``now``'s."""
    due = []
    for assistant in Assistant.objects.filter(archived_at__isnull=True).order_by("pk"):
        settings = assistant.config.consolidation
        if settings.schedule == "nightly" and now.astimezone(_zone(assistant)).hour == settings.hour:
            due.append(assistant)
    return due


def _zone(assistant: Assistant) -> ZoneInfo:
    try:
        return ZoneInfo((assistant.timezone or "UTC").strip())
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


@transaction.atomic
def file_proposal(assistant: Assistant, raw: dict[str, Any], *, filed_by: str) -> Proposal:
    """An agent's proposal (REST or MCP ``memory_propose``), checked like the model's, filed open.

    Raises `Invalid` with the reason; ``filed_by`` (the key or tool) is kept in the reason.
    """
    by_line = {(entry.path, entry.line): entry for entry in collect_entries(assistant)}
    fields = validate(assistant, {"confidence": 0.5, "target_path": "", "rationale": "", **raw}, by_line)
    fields["reason"] = " · ".join(filter(None, [f"filed by {filed_by}", fields["reason"]]))[:255]
    return Proposal.objects.create(assistant=assistant, **fields)
