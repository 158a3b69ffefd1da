"""The export mirror: each assistant as an OpenClaw workspace under EXPORT_ROOT (docs/design.md, Exports).

    EXPORT_ROOT/<team slug>/<assistant slug>/
        MEMORY.md, memory.md, memory/**/*.md   memory documents (a deleted document's file is removed)
        sessions/<session key>.jsonl            transcripts in Pi's v3 format (docs/openclaw-behaviour.md §1.1 B)
        sessions/sessions.json                  OpenClaw's session store (docs/openclaw-behaviour.md §1.1 A)
        assistant.json                          this server's assistant fields (OpenClaw ignores it)

Postgres is the truth and the files are a mirror, so a retried or crashed task loses nothing:
- a transcript grows by appending. `SessionExport` records what its file holds (the last seq, the
  id of that entry, the size), so an export appends the lines of the entries after that seq and
  reads nothing older. Entries are never changed once committed, so old bytes + new lines is byte
  for byte what a rewrite would write, compaction entries included. The file is rewritten whole,
  atomically, when it is not what was recorded (none recorded: a new or imported session; missing,
  shorter, another header, a renamed key or slug) and by `export_assistant` (repairs). A crash
  between an append and its record leaves the file longer than recorded: the next export cuts it
  back and appends again;
- the other files are rewritten whole and atomically (`export_storage`), sessions.json and
  assistant.json only when their content changed.
Writers of one workspace hold a Postgres advisory lock for it, so the last writer is also the one
that read last. A transcript's export holds that lock shared, with an exclusive lock on the session,
so the exports of a team's busy sessions run side by side and each leaves sessions.json to its own
coalesced job (`export_sessions_index`, a second after the first change): the cost of an export
follows what was appended, not how many sessions the assistant has. `session_jsonl_lines` is
shared with the streaming endpoint ``GET /sessions/{id}/export.jsonl``.
"""

from __future__ import annotations

import errno
import heapq
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Q, Subquery
from django.utils import timezone

from memory_app.models import MemoryDocument
from memory_app.paths import ROOT_FILES, validate_memory_path
from openclaw_site.jobs.tasks import TaskOwner, coalesced, enqueue_coalesced
from openclaw_site.models import Assistant
from openclaw_site.platform.locks import xact_lock
from providers.json_types import JSONObject
from sessions_app.messages import epoch_ms
from sessions_app.models import CompactionEntry, Message, Session, SessionExport
from sessions_app.workspace.openclaw_jsonl import (
    CURRENT_VERSION,
    EXPORTER,
    SYSTEM_CUSTOM_TYPE,
    dumps_line,
    format_timestamp,
)
from sessions_app.workspace.pi_entries import (
    AssistantFile,
    CompactionLine,
    MessageLine,
    PiMessage,
    SessionHeader,
    SessionStoreEntry,
)
from sessions_app.workspace.storage import ExportStorage, LocalExportStorage, is_temp_name

logger = logging.getLogger(__name__)

SESSIONS_DIR = "sessions"
MEMORY_DIR = "memory"
SESSION_STORE = "sessions/sessions.json"
ASSISTANT_FILE = "assistant.json"
USAGE_COUNTERS = ("input", "output", "cacheRead", "cacheWrite")
COST_FIELDS = ("input", "output", "cacheRead", "cacheWrite", "total")


@dataclass(frozen=True)
class ExportSummary:
    location: str
    documents: int
    sessions: int
    # Documents the file system refused ("<path>: <why>"); everything else was written.
    unwritten: tuple[str, ...] = ()


class MirrorIncomplete(Exception):
    """Some memory documents could not be written to the mirror; the rest of it was.

    Raised after the whole workspace was written, so its job fails on the Jobs page with the
    documents and the reasons, and nothing else of the mirror waits for them (docs/design.md, Exports).
    """

    def __init__(self, unwritten: tuple[str, ...]) -> None:
        super().__init__(
            f"{len(unwritten)} memory document(s) could not be written to the export mirror, the rest "
            f"of it was: {'; '.join(unwritten)}. Rename them (dashboard: the document's Rename) to "
            "paths the file system can hold."
        )
        self.unwritten = unwritten


@dataclass(frozen=True)
class TranscriptPosition:
    """Where a transcript file ends: the seq of its last entry and that entry's id (None: the header)."""

    seq: int
    entry_id: str | None


def export_storage() -> LocalExportStorage:
    """Return the storage of the export mirror (EXPORT_ROOT)."""
    return LocalExportStorage(Path(settings.EXPORT_ROOT))


def workspace_name(assistant: Assistant) -> str:
    """Return the assistant's directory relative to EXPORT_ROOT: ``<team slug>/<assistant slug>``."""
    return f"{assistant.team.slug}/{assistant.slug}"


def session_file_name(key: str) -> str:
    """Return the transcript file name of a session key (unsafe characters percent-encoded)."""
    # ':' stays readable: OpenClaw keys look like "agent:main:main".
    return f"{quote(key, safe=':@-_.')}.jsonl"


def transcript_name(session: Session, base: str | None = None) -> str:
    """Return the storage name of a session's transcript file under ``base`` (default: its mirror workspace)."""
    workspace = workspace_name(session.assistant) if base is None else base
    return _join(workspace, SESSIONS_DIR, session_file_name(session.key))


def _join(base: str, *parts: str) -> str:
    return "/".join(part for part in (base, *parts) if part)


# --- JSONL: OpenClaw's transcript format -----------------------------------------------------------


def session_jsonl_lines(
    session: Session,
    *,
    cwd: str | None = None,
    after: TranscriptPosition | None = None,
    upto: int | None = None,
) -> Iterator[str]:
    """Yield the session as Pi v3 JSONL lines: the header, then entries chained by ``parentId`` in seq order.

    With ``after``, only the lines that follow a file ending there (no header); ``upto`` stops at a seq.
    """
    stream = after is None
    if after is None:
        yield dumps_line(session_header(session, cwd=cwd))
        after = TranscriptPosition(seq=0, entry_id=None)
    parent_id = after.entry_id
    for row in _rows_in_seq_order(session, after=after.seq, upto=upto, stream=stream):
        entry = (
            message_entry(row, parent_id) if isinstance(row, Message) else compaction_entry(row, parent_id)
        )
        parent_id = entry["id"]
        yield dumps_line(entry)


def session_header(session: Session, *, cwd: str | None = None) -> SessionHeader:
    # cwd is the workspace relative to EXPORT_ROOT: it names the workspace without exposing server paths.
    return {
        "type": "session",
        "version": CURRENT_VERSION,
        "id": str(session.session_uuid),
        "timestamp": format_timestamp(session.created_at),
        "cwd": cwd if cwd is not None else workspace_name(session.assistant),
        # Ours (Pi ignores unknown header keys): EXPORTER_KEY, telling our importer silent entries are marked.
        "exportedBy": EXPORTER,
    }


def _rows_in_seq_order(
    session: Session, *, after: int, upto: int | None, stream: bool
) -> Iterator[Message | CompactionEntry]:
    # Messages and compaction entries share one seq sequence; merge the two ordered streams.
    window = Q(seq__gt=after) if upto is None else Q(seq__gt=after, seq__lte=upto)
    messages = Message.objects.filter(window, session=session).order_by("seq")
    compactions = list(CompactionEntry.objects.filter(window, session=session).order_by("seq"))
    # A whole transcript is streamed (a server-side cursor); an append's few rows are fetched at once,
    # so no cursor outlives the rollback of an export that failed half-way.
    rows = messages.iterator(chunk_size=500) if stream else iter(messages)
    return heapq.merge(rows, compactions, key=lambda row: row.seq)


def message_entry(message: Message, parent_id: str | None) -> MessageLine:
    entry: MessageLine = {
        "type": "message",
        "id": message.entry_id,
        "parentId": parent_id,
        "timestamp": format_timestamp(message.created_at),
        "message": openclaw_message(message),
    }
    if message.silent:  # ours; Pi ignores unknown entry keys
        entry["silent"] = True
    if message.flush_turn:  # ours: a memory-flush turn, never in the model's context
        entry["flushTurn"] = True
    return entry


def compaction_entry(entry: CompactionEntry, parent_id: str | None) -> CompactionLine:
    data: CompactionLine = {
        "type": "compaction",
        "id": entry.entry_id,
        "parentId": parent_id,
        "timestamp": format_timestamp(entry.created_at),
        "summary": entry.summary,
        "firstKeptEntryId": entry.first_kept_entry_id,
        "tokensBefore": entry.tokens_before,
        "details": entry.details,
        "fromHook": entry.from_hook,
        # Ours, ignored by Pi: what our CompactionEntry records beyond Pi's fields.
        "trigger": entry.trigger,
    }
    if entry.tokens_after is not None:
        data["tokensAfter"] = entry.tokens_after
    if entry.offline:
        data["offline"] = True
    return data


def openclaw_message(message: Message) -> PiMessage:
    """Return a stored message as Pi's AgentMessage (pi-ai types), with a numeric ms ``timestamp``."""
    if message.role == "system":
        # Pi has no system role in transcripts; a custom message is what it can carry (and send as context).
        data: PiMessage = {
            "role": "custom",
            "customType": SYSTEM_CUSTOM_TYPE,
            "content": message.content,
            "display": False,
        }
    else:
        data = {"role": message.role, "content": _content(message)}
    if message.role == "assistant":
        data["api"] = message.api
        data["provider"] = message.provider
        data["model"] = message.model
        data["usage"] = openclaw_usage(message.usage)
        data["stopReason"] = message.stop_reason or "stop"
        if message.error_message:
            data["errorMessage"] = message.error_message
    if message.role == "toolResult":
        data["toolCallId"] = message.tool_call_id
        data["toolName"] = message.tool_name
        data["isError"] = message.is_error
    if message.details is not None:
        data["details"] = message.details
    data["timestamp"] = epoch_ms(message.created_at)
    return data


def _content(message: Message) -> object:
    # Pi reads assistant and tool-result content as a block list; only user content may be a string.
    if isinstance(message.content, str) and message.role in ("assistant", "toolResult"):
        return [{"type": "text", "text": message.content}] if message.content else []
    return message.content


def openclaw_usage(usage: object) -> JSONObject:
    """Return usage in pi-ai's shape ``{input, output, cacheRead, cacheWrite, totalTokens, cost{...}}``.

    OpenClaw reads every counter and ``cost.total`` without checks, so missing ones become 0.
    """
    source: JSONObject = usage if isinstance(usage, dict) else {}
    counts = {key: _number(source.get(key)) for key in USAGE_COUNTERS}
    total = _number(source.get("totalTokens")) or sum(counts.values())
    given_cost = source.get("cost")
    cost_source: JSONObject = given_cost if isinstance(given_cost, dict) else {}
    cost = {**cost_source, **{key: _number(cost_source.get(key)) for key in COST_FIELDS}}
    return {**source, **counts, "totalTokens": total, "cost": cost}


def _number(value: object) -> int | float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


# --- sessions.json: OpenClaw's session store -------------------------------------------------------


def session_store(assistant: Assistant) -> dict[str, SessionStoreEntry]:
    """Return the assistant's ``sessions.json``: session key -> OpenClaw SessionEntry fields."""
    last_assistant = (
        Message.objects.filter(session=OuterRef("pk"), role="assistant").exclude(model="").order_by("-seq")
    )
    sessions = (
        Session.objects.filter(assistant=assistant)
        .order_by("key")
        .annotate(
            last_model=Subquery(last_assistant.values("model")[:1]),
            last_provider=Subquery(last_assistant.values("provider")[:1]),
        )
    )
    return {session.key: session_store_entry(session, assistant) for session in sessions}


def session_store_entry(session: Session, assistant: Assistant) -> SessionStoreEntry:
    entry: SessionStoreEntry = {
        "sessionId": str(session.session_uuid),
        "sessionFile": session_file_name(session.key),
        "updatedAt": epoch_ms(session.updated_at),
        "sessionStartedAt": epoch_ms(session.created_at),
        "totalTokensFresh": session.total_tokens_fresh,
        "compactionCount": session.compaction_count,
        "contextTokens": assistant.context_window,
    }
    # A missing value is OpenClaw's undefined, so its key is left out; None in
    # memoryFlushCompactionCount means "never flushed" (docs/openclaw-behaviour.md §1.1 A).
    if session.title:
        entry["label"] = session.title
    if session.total_tokens is not None:
        entry["totalTokens"] = session.total_tokens
    if session.memory_flush_at:
        entry["memoryFlushAt"] = epoch_ms(session.memory_flush_at)
    if session.memory_flush_compaction_count is not None:
        entry["memoryFlushCompactionCount"] = session.memory_flush_compaction_count
    if model := getattr(session, "last_model", None):
        entry["model"] = model
    if provider := getattr(session, "last_provider", None):
        entry["modelProvider"] = provider
    _add_usage_counters(entry, session.last_usage)
    return entry


def _add_usage_counters(entry: SessionStoreEntry, usage: object) -> None:
    """Copy pi-ai's usage counters under the names of OpenClaw's SessionEntry."""
    if not isinstance(usage, dict):
        return
    if isinstance(value := usage.get("input"), (int, float)):
        entry["inputTokens"] = value
    if isinstance(value := usage.get("output"), (int, float)):
        entry["outputTokens"] = value
    if isinstance(value := usage.get("cacheRead"), (int, float)):
        entry["cacheRead"] = value
    if isinstance(value := usage.get("cacheWrite"), (int, float)):
        entry["cacheWrite"] = value


def assistant_metadata(assistant: Assistant) -> AssistantFile:
    """Return ``assistant.json``: the fields an import needs to recreate the assistant ."""
    return {
        "slug": assistant.slug,
        "name": assistant.name,
        "model": assistant.model,
        "context_window": assistant.context_window,
        "system_prompt": assistant.system_prompt,
        "timezone": assistant.timezone,
        "workspace_access": assistant.workspace_access,
        "settings": assistant.settings,
    }


def _dumps_json(data: object) -> str:
    # OpenClaw writes sessions.json with JSON.stringify(store, null, 2).
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


# --- Writing the mirror ----------------------------------------------------------------------------


@contextmanager
def _locked_assistant(assistant_id: int, *, shared: bool = False) -> Iterator[Assistant | None]:
    """Hold the workspace lock of an assistant (until the transaction ends) and yield it, or None if gone."""
    with transaction.atomic():
        xact_lock(f"export:{assistant_id}", shared=shared)
        yield Assistant.objects.select_related("team").filter(pk=assistant_id).first()


def export_session(session_id: int, *, storage: ExportStorage | None = None) -> bool:
    """Bring a session's transcript file up to date and queue sessions.json's; False if the session is gone.

    A workspace not in the mirror yet (a new EXPORT_ROOT, a renamed slug) is written whole instead.
    """
    assistant_id = Session.objects.filter(pk=session_id).values_list("assistant_id", flat=True).first()
    if assistant_id is None:
        return False
    storage = storage or export_storage()
    with _locked_assistant(assistant_id, shared=True) as assistant:
        if assistant is None:
            return False
        if storage.exists(_join(workspace_name(assistant), SESSION_STORE)):
            xact_lock(f"export-session:{session_id}")  # the transcript file has one writer
            return _export_transcript_of(storage, assistant, session_id)
    with _locked_assistant(assistant_id) as assistant:  # alone in the workspace
        if assistant is None:
            return False
        if _ensure_workspace(storage, workspace_name(assistant), assistant):
            return Session.objects.filter(pk=session_id).exists()
        return _export_transcript_of(storage, assistant, session_id)  # another export wrote it meanwhile


def _export_transcript_of(storage: ExportStorage, assistant: Assistant, session_id: int) -> bool:
    """Export one session's transcript into the assistant's existing workspace, under the locks."""
    session = Session.objects.filter(pk=session_id, assistant=assistant).first()
    if session is None:
        return False
    session.assistant = assistant
    _export_transcript(storage, workspace_name(assistant), session)
    # sessions.json a second after the first export that changed it, for all the exports until then.
    queue_sessions_index(TaskOwner.for_assistant(assistant), delay_seconds=settings.SESSION_JOB_DELAY_SECONDS)
    return True


def queue_sessions_index(owner: TaskOwner, *, delay_seconds: float = 0.0) -> None:
    """Queue `export_sessions_index` for the owner's assistant (one pending per assistant)."""
    enqueue_coalesced(
        coalesced(
            "sessions_app.tasks.export_sessions_index",
            owner.assistant_id,
            owner=owner,
            task_name=f"export-index-{owner.assistant_id}",
            coalesce_key=f"export-sessions-index:{owner.assistant_id}",
            delay_seconds=delay_seconds,
        )
    )


def export_sessions_index(assistant_id: int, *, storage: ExportStorage | None = None) -> bool:
    """Write sessions.json if it changed and remove transcripts of deleted or renamed sessions."""
    storage = storage or export_storage()
    with _locked_assistant(assistant_id) as assistant:
        if assistant is None:
            return False
        base = workspace_name(assistant)
        if not _ensure_workspace(storage, base, assistant):
            _write_session_store(storage, base, assistant)
    return True


def _write_session_store(storage: ExportStorage, base: str, assistant: Assistant) -> None:
    store = session_store(assistant)
    _save_if_changed(storage, _join(base, SESSION_STORE), _dumps_json(store))
    expected = {entry["sessionFile"] for entry in store.values()}
    _, files = storage.listdir(_join(base, SESSIONS_DIR))
    for name in files:
        # Under the workspace lock any temp file is a crashed writer's leftover.
        if (name.endswith(".jsonl") and name not in expected) or is_temp_name(name):
            storage.delete(_join(base, SESSIONS_DIR, name))


def export_memory_document(assistant_id: int, path: str, *, storage: ExportStorage | None = None) -> bool:
    """Write one memory document's file, or remove it if the document was deleted. False if the assistant is gone."""
    path = validate_memory_path(path)  # never trust a path near the file system
    storage = storage or export_storage()
    with _locked_assistant(assistant_id) as assistant:
        if assistant is None:
            return False
        base = workspace_name(assistant)
        if _ensure_workspace(storage, base, assistant):
            return True
        document = MemoryDocument.objects.filter(assistant=assistant, path=path).first()
        if document is not None:
            unwritten = _save_document(storage, base, document)
            if unwritten is not None:
                raise MirrorIncomplete((unwritten,))
        else:
            _delete_memory_file(storage, base, path)
    return True


def _delete_memory_file(storage: ExportStorage, base: str, path: str) -> None:
    storage.delete(_join(base, path))
    parent = path.rpartition("/")[0]
    if parent.startswith(f"{MEMORY_DIR}/"):
        storage.remove_empty_dirs(_join(base, parent), stop_at=_join(base, MEMORY_DIR))


def export_assistant_metadata(assistant_id: int, *, storage: ExportStorage | None = None) -> bool:
    """Write ``assistant.json`` if it changed; False if the assistant is gone.

    A workspace without sessions.json is new to the mirror (a new assistant, or a renamed team or
    assistant slug): then the whole workspace is written.
    """
    storage = storage or export_storage()
    with _locked_assistant(assistant_id) as assistant:
        if assistant is None:
            return False
        base = workspace_name(assistant)
        if not _ensure_workspace(storage, base, assistant):
            _save_if_changed(storage, _join(base, ASSISTANT_FILE), _dumps_json(assistant_metadata(assistant)))
    return True


def remove_workspace(team_slug: str, assistant_slug: str, *, storage: ExportStorage | None = None) -> bool:
    """Remove a deleted assistant's workspace from the mirror; False if an assistant has its name again."""
    if Assistant.objects.filter(team__slug=team_slug, slug=assistant_slug).exists():
        return False
    (storage or export_storage()).remove_tree(f"{team_slug}/{assistant_slug}")
    return True


def export_assistant(
    assistant_id: int, *, storage: ExportStorage | None = None, base: str | None = None
) -> ExportSummary:
    """Rewrite the whole workspace of an assistant and remove files of deleted documents and sessions.

    ``storage`` and ``base`` default to the mirror (EXPORT_ROOT, ``<team>/<assistant>``);
    `export_workspace --out DIR` passes a storage rooted at DIR and ``base=""``.
    """
    storage = storage or export_storage()
    with _locked_assistant(assistant_id) as assistant:
        if assistant is None:
            raise Assistant.DoesNotExist(f"assistant {assistant_id} does not exist")
        if base is None:
            return _export_all(storage, workspace_name(assistant), assistant, mirror=True)
        return _export_all(storage, base, assistant, mirror=False)


def _ensure_workspace(storage: ExportStorage, base: str, assistant: Assistant) -> bool:
    """Write the whole workspace if the mirror has none yet (new EXPORT_ROOT, renamed slug); say if it did."""
    if storage.exists(_join(base, SESSION_STORE)):
        return False
    _export_all(storage, base, assistant, mirror=True)
    return True


def _export_all(storage: ExportStorage, base: str, assistant: Assistant, *, mirror: bool) -> ExportSummary:
    """Write every file of the workspace; ``mirror``: it is the export mirror, so record its transcripts.

    A document the file system refuses is left out and the rest is written; the mirror then raises
    `MirrorIncomplete` at the end, an export to a folder or a zip lists it in the summary.
    """
    documents, unwritten = _write_all_documents(storage, base, assistant)
    sessions = list(Session.objects.filter(assistant=assistant).order_by("key"))
    cwd = workspace_name(assistant)
    for session in sessions:
        session.assistant = assistant
        name = transcript_name(session, base)
        if mirror:
            _rewrite_transcript(storage, name, session)
        else:
            storage.save_lines(name, session_jsonl_lines(session, cwd=cwd))
    _write_session_store(storage, base, assistant)
    _save_if_changed(storage, _join(base, ASSISTANT_FILE), _dumps_json(assistant_metadata(assistant)))
    if mirror and unwritten:
        raise MirrorIncomplete(unwritten)
    return ExportSummary(location=base, documents=documents, sessions=len(sessions), unwritten=unwritten)


def _write_all_documents(
    storage: ExportStorage, base: str, assistant: Assistant
) -> tuple[int, tuple[str, ...]]:
    """Write every document; return how many were written and why the others were not."""
    documents = list(MemoryDocument.objects.filter(assistant=assistant).order_by("path"))
    unwritten = tuple(
        problem for document in documents if (problem := _save_document(storage, base, document)) is not None
    )
    keep = {document.path for document in documents}
    for path in [*ROOT_FILES, *_memory_files(storage, base, MEMORY_DIR)]:
        if path not in keep and storage.exists(_join(base, path)):
            _delete_memory_file(storage, base, path)
    return len(documents) - len(unwritten), unwritten


def _save_document(storage: ExportStorage, base: str, document: MemoryDocument) -> str | None:
    """Write one document's file; return why the file system refused it (None when written)."""
    try:
        storage.save_lines(_join(base, document.path), [document.content])
    except (OSError, ValueError) as error:  # a name too long, a file where a folder must be, ...
        logger.warning("memory document %s not mirrored: %s", document.path, error)
        return f"{document.path}: {_why_unwritten(error)}"
    return None


def _why_unwritten(error: Exception) -> str:
    """Say in words why the file system refused a document's file."""
    if isinstance(error, (FileExistsError, NotADirectoryError)):
        return "another document is a file where this path needs a folder"
    if isinstance(error, IsADirectoryError):
        return "other documents are inside a folder of this name"
    if isinstance(error, OSError) and error.errno == errno.ENAMETOOLONG:
        return "a file or folder name is too long for the file system"
    return str(getattr(error, "strerror", None) or error)


def _memory_files(storage: ExportStorage, base: str, directory: str) -> Iterator[str]:
    """Yield the workspace-relative paths of Markdown files (and stale temp files) under ``directory``."""
    directories, files = storage.listdir(_join(base, directory))
    for name in files:
        if name.endswith(".md") or is_temp_name(name):
            yield f"{directory}/{name}"
    for name in directories:
        yield from _memory_files(storage, base, f"{directory}/{name}")


def _save_if_changed(storage: ExportStorage, name: str, text: str) -> bool:
    """Write ``text`` to ``name`` unless the file holds exactly that already; say if it wrote."""
    data = text.encode("utf-8")
    # One byte more than the text: a longer file differs too.
    if storage.read_head(name, len(data) + 1) == data:
        return False
    storage.save_lines(name, [text])
    return True


# --- Transcript files: append what is new, rewrite what is unknown ---------------------------------


def _export_transcript(storage: ExportStorage, base: str, session: Session) -> None:
    """Bring a session's transcript file up to ``session.last_seq``: append the new lines, or rewrite it."""
    name = transcript_name(session, base)
    state = SessionExport.objects.filter(session=session).first()
    if state is None or not _holds_record(storage, name, session, state):
        _rewrite_transcript(storage, name, session)
        return
    if state.seq == session.last_seq:  # nothing new: a retried task, or one a later export served
        return
    after = TranscriptPosition(seq=state.seq, entry_id=state.entry_id or None)
    # ``upto``: every entry up to the session's last_seq was committed with it, later ones may not be.
    # Built before writing, so a failed read appends nothing.
    lines = list(session_jsonl_lines(session, after=after, upto=session.last_seq))
    size = storage.append_lines(name, lines)
    _record_export(session, file=name, position=_position_at(lines[-1], seq=session.last_seq), size=size)


def _holds_record(storage: ExportStorage, name: str, session: Session, state: SessionExport) -> bool:
    """Tell whether the file starts with what ``state`` recorded, cutting off lines appended after it."""
    if state.file != name or state.seq > session.last_seq:
        return False
    header = dumps_line(session_header(session)).encode("utf-8")
    size = storage.size(name)
    if size is None or size < state.size or storage.read_head(name, len(header)) != header:
        return False
    if size > state.size:  # an export died between its append and its record: drop what it wrote
        storage.truncate(name, state.size)
    return True


def _rewrite_transcript(storage: ExportStorage, name: str, session: Session) -> None:
    """Write the whole transcript file atomically and record what it holds."""
    lines = _Tally(session_jsonl_lines(session, upto=session.last_seq))
    storage.save_lines(name, lines)
    _record_export(
        session, file=name, position=_position_at(lines.last, seq=session.last_seq), size=lines.size
    )


def _record_export(session: Session, *, file: str, position: TranscriptPosition, size: int) -> None:
    """Record what the session's transcript file holds now (committed with the export's transaction)."""
    fields = {"file": file, "seq": position.seq, "entry_id": position.entry_id or "", "size": size}
    # Under the workspace lock no other export records this session: update, else create.
    if not SessionExport.objects.filter(session=session).update(**fields, updated_at=timezone.now()):
        SessionExport.objects.create(session=session, **fields)


def _position_at(last_line: str, *, seq: int) -> TranscriptPosition:
    """Return where a file ending in ``last_line`` ends (the header line: before the first entry)."""
    data = json.loads(last_line)
    return TranscriptPosition(seq=seq, entry_id=None if data["type"] == "session" else data["id"])


class _Tally:
    """Pass lines through, counting their bytes and keeping the last one."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines
        self.size = 0
        self.last = ""

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            self.size += len(line.encode("utf-8"))
            self.last = line
            yield line
