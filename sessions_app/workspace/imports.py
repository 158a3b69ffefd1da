"""Loading an OpenClaw workspace (the export layout) into an assistant, all or nothing.

    MEMORY.md, memory.md, memory/**/*.md   -> memory documents (revisions by author "import")
    sessions/sessions.json                 -> session keys and counters (optional)
    sessions/*.jsonl                       -> sessions: the active branch of each transcript
    assistant.json                         -> the assistant's fields (optional; written by our export)

`read_workspace` checks every file's name, kind and size before anything is written; then
`import_workspace` reads, validates and writes the files one at a time, in one transaction, so the
process holds one file at a time however large the workspace (docs/design.md, Limits and
refusals), and a broken file rolls the whole import back: a broken workspace changes nothing. Entry ids, timestamps, compaction
entries and the silent flag are kept, so ``import(export(x))`` recreates ``x``.
"""

from __future__ import annotations

import math
import stat
import uuid
import zoneinfo
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypedDict
from urllib.parse import unquote

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction

from memory_app.documents import Provenance, delete_document, write_document
from memory_app.index.jobs import queue_reindex
from memory_app.models import Author, MemoryDocument, MemoryImport
from memory_app.paths import ROOT_FILES, InvalidPath, mirror_ancestors, validate_memory_path
from memory_app.signals import notifications_held
from openclaw_site.errors import DomainError
from openclaw_site.guards.json_input import JsonInputError, loads_checked, unstorable_text
from openclaw_site.jobs.tasks import TaskOwner, enqueue
from openclaw_site.models import Assistant, Team, WorkspaceAccess
from openclaw_site.teams.assistant_settings import SettingsError, check_fits_window, validate_settings
from openclaw_site.teams.settings_document import SettingsDocument
from openclaw_site.usage.fair_share import Pacer
from providers.json_types import JSONObject
from sessions_app.messages import MessageError, MessageInput, validate_message
from sessions_app.models import CompactionEntry, Message, Session
from sessions_app.services import check_session_key
from sessions_app.transcript import (
    add_running_tokens,
    after_transcript_change,
    message_row,
    stored_content_bytes,
)
from sessions_app.workspace.openclaw_jsonl import (
    ParsedEntry,
    ParsedTranscript,
    TranscriptError,
    parse_transcript,
)

SESSION_KEY_MAX = int(Session._meta.get_field("key").max_length or 0)
# What the session's counters (PositiveIntegerField) and the API's context window can hold.
MAX_COUNT = 2**31 - 1
MAX_CONTEXT_WINDOW = 100_000_000


class WorkspaceImportError(Exception):
    """The workspace cannot be imported; nothing was written. The message says which file and why."""


class AssistantFields(TypedDict, total=False):
    """What assistant.json may set on the assistant, each value checked."""

    name: str
    model: str
    system_prompt: str
    timezone: str
    context_window: int
    workspace_access: str
    settings: SettingsDocument


_TEXT_FIELDS: tuple[tuple[Literal["name", "model", "system_prompt", "timezone"], int | None], ...] = (
    ("name", 200),
    ("model", 200),
    ("system_prompt", None),
    ("timezone", 64),
)


class SessionFields(TypedDict):
    """The Session columns a sessions.json entry and its transcript give."""

    title: str
    total_tokens: int | None
    total_tokens_fresh: bool
    compaction_count: int
    memory_flush_at: datetime | None
    memory_flush_compaction_count: int | None
    last_cache_touch_at: datetime | None
    last_usage: JSONObject | None


@dataclass(frozen=True)
class SessionSource:
    """A transcript to import, read only when its turn comes: its key, file and sessions.json entry."""

    key: str
    filename: str
    store: JSONObject  # its sessions.json entry, as read


@dataclass(frozen=True)
class SessionFile:
    key: str
    filename: str
    transcript: ParsedTranscript
    store: JSONObject  # its sessions.json entry, as read
    inputs: dict[str, MessageInput]  # entry id -> validated message


@dataclass(frozen=True)
class Workspace:
    directory: Path
    documents: dict[str, Path]  # memory path -> its file, read when it is written
    sessions: tuple[SessionSource, ...]
    assistant: AssistantFields | None
    notes: tuple[str, ...] = ()


@dataclass
class ImportReport:
    assistant: str
    created: bool
    documents: int = 0
    deleted_documents: int = 0
    sessions: int = 0
    deleted_sessions: int = 0
    messages: int = 0
    compactions: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """Return the report as lines for the command's output."""
        verb = "Created" if self.created else "Replaced"
        lines = [
            f"{verb} assistant {self.assistant}: {self.documents} memory document(s), {self.sessions} session(s), "
            f"{self.messages} message(s), {self.compactions} compaction entr{'y' if self.compactions == 1 else 'ies'}.",
        ]
        if not self.created:
            lines.append(
                f"Removed {self.deleted_sessions} old session(s) and "
                f"{self.deleted_documents} old document(s)."
            )
        lines += [f"  skipped or mapped {name}: {count}" for name, count in sorted(self.skipped.items())]
        lines += [f"  note: {note}" for note in self.notes]
        return lines


# --- Reading and validating (no database writes) ---------------------------------------------------


def read_workspace(directory: Path) -> Workspace:
    """List a workspace's files with their names, kinds and sizes checked, or raise WorkspaceImportError.

    Only ``sessions.json`` and ``assistant.json`` are read here; documents and transcripts are
    read one at a time by `import_workspace` as it writes them.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise WorkspaceImportError(f"{directory} is not a directory")
    notes: list[str] = []
    documents = _read_documents(directory)
    sessions = _read_sessions(directory, notes)
    assistant = _read_assistant_file(directory, directory / "assistant.json")
    has_store = (directory / "sessions" / "sessions.json").is_file()
    if not documents and not sessions and assistant is None and not has_store:
        raise WorkspaceImportError(
            f"{directory} holds no MEMORY.md, memory/*.md or sessions/*.jsonl; is it an OpenClaw workspace?"
        )
    return Workspace(
        directory=directory,
        documents=documents,
        sessions=tuple(sessions),
        assistant=assistant,
        notes=tuple(notes),
    )


def _check_file(directory: Path, file: Path, name: str, *, limit: int) -> None:
    """Refuse a file that reaches outside the workspace, is not a regular file or is over ``limit``."""
    _check_inside(directory, file, name)
    try:
        info = file.stat()
    except OSError as error:
        raise WorkspaceImportError(f"{name} cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise WorkspaceImportError(f"{name} is not a regular file")
    size = info.st_size
    if size > limit:
        raise WorkspaceImportError(f"{name} is {size} bytes; the limit is {limit}")


def _read_text(directory: Path, file: Path, name: str, *, limit: int) -> str:
    """Read a workspace file as UTF-8 text, refusing what could reach outside it or cannot be stored."""
    _check_file(directory, file, name, limit=limit)
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise WorkspaceImportError(f"{name} is not UTF-8 text (byte {error.start})") from None
    reason = unstorable_text(text)
    if reason is not None:
        raise WorkspaceImportError(f"{name} {reason}")
    return text


def _read_json(directory: Path, file: Path, name: str, *, limit: int) -> Any:
    try:
        return loads_checked(_read_text(directory, file, name, limit=limit))
    except JsonInputError as error:
        raise WorkspaceImportError(f"{name}: {error.message}") from None
    except ValueError as error:
        raise WorkspaceImportError(f"{name} is not valid JSON ({error})") from None


def _check_inside(directory: Path, file: Path, name: str) -> None:
    """Refuse a file or folder whose real path (symlinks followed) leaves the workspace."""
    if directory.resolve() not in file.resolve().parents:
        raise WorkspaceImportError(f"{name} points outside the workspace (a symlink?); nothing was imported")


def _read_documents(directory: Path) -> dict[str, Path]:
    memory_dir = directory / "memory"
    files = [directory / name for name in ROOT_FILES]
    if memory_dir.is_dir():
        _check_inside(directory, memory_dir, "memory/")
        files += sorted(memory_dir.rglob("*.md"))
    documents: dict[str, Path] = {}
    for file in files:
        if not file.exists() and not file.is_symlink():
            continue
        name = file.relative_to(directory).as_posix()
        try:
            path = validate_memory_path(name)
        except InvalidPath as error:
            raise WorkspaceImportError(f"{name}: not a valid memory path ({error})") from None
        _check_file(directory, file, name, limit=settings.MAX_MEMORY_DOCUMENT_BYTES)
        documents[path] = file
    _check_mirror_clashes(list(documents))
    return documents


def _check_mirror_clashes(paths: list[str]) -> None:
    """Refuse documents the mirror could not hold side by side (a file where a folder must be, case twins)."""
    files: dict[str, str] = {}
    for path in paths:
        twin = files.setdefault(path.casefold(), path)
        if twin != path:
            raise WorkspaceImportError(
                f"{path} and {twin} differ only in case; case-insensitive file systems hold one (rename one)"
            )
    for path in paths:
        for folder in mirror_ancestors(path):
            if folder.casefold() in files:
                raise WorkspaceImportError(
                    f"{files[folder.casefold()]} is a document, so it cannot also be the folder of {path}"
                )


def _read_store(directory: Path, file: Path) -> dict[str, JSONObject]:
    if not file.exists() and not file.is_symlink():
        return {}
    store = _read_json(directory, file, "sessions/sessions.json", limit=settings.MAX_IMPORT_FILE_BYTES)
    if not isinstance(store, dict) or not all(isinstance(v, dict) for v in store.values()):
        raise WorkspaceImportError("sessions/sessions.json must map session keys to objects")
    return store


def _read_sessions(directory: Path, notes: list[str]) -> list[SessionSource]:
    sessions_dir = directory / "sessions"
    if not sessions_dir.is_dir():
        return []
    _check_inside(directory, sessions_dir, "sessions/")
    store = _read_store(directory, sessions_dir / "sessions.json")
    used: dict[str, str] = {}  # file name -> key
    sessions = []
    for key, entry in store.items():
        filename = _store_file(sessions_dir, entry)
        if filename is None:
            notes.append(f"sessions.json key {key!r} has no transcript file; skipped")
        elif filename in used:
            notes.append(
                f"sessions.json key {key!r} names the transcript of {used[filename]!r} again; skipped"
            )
        else:
            used[filename] = key
            sessions.append(_session_source(directory, _check_key(key), filename, entry))
    keys = {session.key for session in sessions}
    for file in sorted(sessions_dir.glob("*.jsonl")):
        if file.name not in used:  # a transcript sessions.json does not list: keep it under its file name
            key = _unique_key(_check_key(unquote(file.name[: -len(".jsonl")])), keys, notes)
            keys.add(key)
            sessions.append(_session_source(directory, key, file.name, {}))
    return sessions


def _session_source(directory: Path, key: str, filename: str, store: JSONObject) -> SessionSource:
    source = f"sessions/{filename}"
    _check_file(directory, directory / source, source, limit=settings.MAX_IMPORT_FILE_BYTES)
    return SessionSource(key=key, filename=filename, store=store)


def _store_file(sessions_dir: Path, entry: JSONObject) -> str | None:
    """Return the transcript file name of a sessions.json entry (sessionFile, else <sessionId>.jsonl)."""
    candidates = []
    if isinstance(session_file := entry.get("sessionFile"), str) and session_file.strip():
        # OpenClaw may store an absolute path from another machine; transcripts sit directly in sessions/.
        candidates.append(Path(session_file.strip()).name)
    if isinstance(session_id := entry.get("sessionId"), str) and session_id.strip():
        candidates.append(f"{session_id.strip()}.jsonl")
    for name in candidates:
        file = sessions_dir / name
        if name.endswith(".jsonl") and (file.exists() or file.is_symlink()):
            return name  # _read_session refuses it if it leaves the workspace
    return None


def _check_key(key: Any) -> str:
    """A session key the API would accept (`sessions_app.services.check_session_key`)."""
    if not isinstance(key, str) or not key.strip() or len(key) > SESSION_KEY_MAX:
        raise WorkspaceImportError(f"session key {key!r} must be 1 to {SESSION_KEY_MAX} characters")
    try:
        check_session_key(key)
    except DomainError as error:
        raise WorkspaceImportError(f"session key {key!r}: {error.message}") from None
    return key


def _unique_key(key: str, taken: set[str], notes: list[str]) -> str:
    if key not in taken:
        return key
    number = 2
    while f"{key}-{number}" in taken:
        number += 1
    notes.append(
        f"session key {key!r} is used twice; the transcript file {key}.jsonl was imported as {key}-{number}"
    )
    return f"{key}-{number}"


def _read_session(directory: Path, found: SessionSource) -> SessionFile:
    """Read, parse and validate one transcript (the one the import is about to write)."""
    key, filename, store = found.key, found.filename, found.store
    source = f"sessions/{filename}"
    text = _read_text(directory, directory / source, source, limit=settings.MAX_IMPORT_FILE_BYTES)
    try:
        transcript = parse_transcript(text, source=source)
    except TranscriptError as error:
        raise WorkspaceImportError(str(error)) from None
    inputs = {
        entry.entry_id: _validated(entry, source) for entry in transcript.entries if entry.kind == "message"
    }
    return SessionFile(key=key, filename=filename, transcript=transcript, store=store, inputs=inputs)


def _validated(entry: ParsedEntry, source: str) -> MessageInput:
    try:
        return validate_message(entry.message, max_bytes=settings.MAX_MESSAGE_BYTES)
    except MessageError as error:
        hint = " (raise OPENCLAW_MAX_MESSAGE_BYTES to import it)" if error.too_large else ""
        raise WorkspaceImportError(f"{source} line {entry.line}: {error.message}{hint}") from None


def _read_assistant_file(directory: Path, file: Path) -> AssistantFields | None:
    if not file.exists() and not file.is_symlink():
        return None
    data = _read_json(directory, file, "assistant.json", limit=settings.MAX_REQUEST_BYTES)
    if not isinstance(data, dict):
        raise WorkspaceImportError("assistant.json must be a JSON object")
    return _assistant_fields(data)


def _assistant_fields(data: JSONObject) -> AssistantFields:
    fields: AssistantFields = {}
    for name, limit in _TEXT_FIELDS:
        if name in data:
            value = data[name]
            if not isinstance(value, str) or (limit and len(value) > limit):
                bound = f" of at most {limit} characters" if limit else ""
                raise WorkspaceImportError(f"assistant.json: {name} must be a string{bound}")
            fields[name] = value
    if "timezone" in fields:
        _check_timezone(fields["timezone"])
    if "context_window" in data:
        window = data["context_window"]
        if (
            not isinstance(window, int)
            or isinstance(window, bool)
            or not 16000 <= window <= MAX_CONTEXT_WINDOW
        ):
            raise WorkspaceImportError(
                f"assistant.json: context_window must be an integer from 16000 to {MAX_CONTEXT_WINDOW}"
            )
        fields["context_window"] = window
    if "workspace_access" in data:
        access = data["workspace_access"]
        if not isinstance(access, str) or access not in WorkspaceAccess.values:
            choices = ", ".join(WorkspaceAccess.values)
            raise WorkspaceImportError(f"assistant.json: workspace_access must be one of {choices}")
        fields["workspace_access"] = access
    if "settings" in data:
        try:
            fields["settings"] = validate_settings(data["settings"])
        except SettingsError as error:
            raise WorkspaceImportError(f"assistant.json: settings: {error}") from None
    return fields


def _check_timezone(name: str) -> None:
    """An IANA time zone, as the API requires."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise WorkspaceImportError(
            f"assistant.json: timezone {name!r} is not an IANA time zone (e.g. Europe/Berlin)"
        ) from None


# --- Writing (one transaction) ---------------------------------------------------------------------


def import_workspace(
    *, directory: Path | str, team_slug: str, assistant_slug: str, replace: bool = False
) -> ImportReport:
    """Import a workspace into ``team_slug/assistant_slug``; refuse an existing assistant unless ``replace``."""
    try:
        validate_slug(assistant_slug)
    except ValidationError:
        raise WorkspaceImportError(
            f"{assistant_slug!r} is not a valid assistant slug (letters, digits, - and _)"
        ) from None
    workspace = read_workspace(Path(directory))
    with notifications_held(), transaction.atomic():
        team = Team.objects.filter(slug=team_slug).first()
        if team is None:
            raise WorkspaceImportError(f"no team {team_slug!r}")
        assistant = (
            Assistant.objects.select_for_update(no_key=True).filter(team=team, slug=assistant_slug).first()
        )
        if assistant is not None and not replace:
            raise WorkspaceImportError(
                f"assistant {team_slug}/{assistant_slug} already exists; pass --replace to overwrite it"
            )
        report = ImportReport(
            assistant=f"{team_slug}/{assistant_slug}", created=assistant is None, notes=list(workspace.notes)
        )
        assistant = _save_assistant(team, assistant_slug, assistant, workspace.assistant)
        report.deleted_sessions = (
            Session.objects.filter(assistant=assistant).delete()[1].get("sessions_app.Session", 0)
        )
        _import_documents(assistant, workspace, report)
        taken: set[uuid.UUID] = set()
        pacer = Pacer(team.pk)
        for found in workspace.sessions:  # one transcript in memory at a time
            _import_session(assistant, _read_session(workspace.directory, found), report, taken)
            pacer.step()
        _queue_follow_up(assistant)
    return report


def _queue_follow_up(assistant: Assistant) -> None:
    """Queue what the imported documents need, as two jobs on the default queue.

    A write of one document queues its own index job (on the urgent queue, a person waits for
    it) and export; an import of 20,000 documents did so 20,000 times over, and every other
    team's memory writes waited behind them. The import holds those notifications back
    (`notifications_held`) and queues one incremental reindex of the assistant, which indexes
    its documents in groups and reports its progress on the Jobs page, and one rewrite of its
    export mirror (docs/design.md, Background work).
    """
    queue_reindex(assistant, full=False)
    enqueue(
        "sessions_app.tasks.export_assistant",
        assistant.pk,
        owner=TaskOwner.for_assistant(assistant),
        task_name=f"export-workspace-{assistant.pk}",
        coalesce_key=f"export-workspace:{assistant.pk}",
    )


def _save_assistant(
    team: Team, slug: str, assistant: Assistant | None, fields: AssistantFields | None
) -> Assistant:
    if assistant is None:
        assistant = Assistant(team=team, slug=slug, name=slug)
    for name, value in (fields or {}).items():
        setattr(assistant, name, value)
    try:
        check_fits_window(validate_settings(assistant.settings), context_window=assistant.context_window)
    except SettingsError as error:
        raise WorkspaceImportError(f"assistant.json: {error}") from None
    assistant.save()
    return assistant


def _import_documents(assistant: Assistant, workspace: Workspace, report: ImportReport) -> None:
    label = f"import_workspace {workspace.directory}"
    record = MemoryImport.objects.create(assistant=assistant, label=label[:255])
    provenance = Provenance(author=Author.IMPORT, note=label, import_pk=record.pk)
    for document in MemoryDocument.objects.filter(assistant=assistant).exclude(
        path__in=list(workspace.documents)
    ):
        delete_document(document=document, provenance=provenance)  # its revisions stay
        report.deleted_documents += 1
    limit = settings.MAX_MEMORY_DOCUMENT_BYTES
    pacer = Pacer(assistant.team_id)  # rests while other teams search (docs/design.md, fair sharing)
    for path, file in sorted(workspace.documents.items()):  # one document in memory at a time
        name = file.relative_to(workspace.directory).as_posix()
        content = _read_text(workspace.directory, file, name, limit=limit)
        write_document(assistant=assistant, path=path, content=content, provenance=provenance)
        report.documents += 1
        pacer.step()


def _import_session(
    assistant: Assistant, source: SessionFile, report: ImportReport, taken: set[uuid.UUID]
) -> None:
    transcript, store = source.transcript, source.store
    session = Session.objects.create(
        assistant=assistant,
        key=source.key,
        session_uuid=_session_uuid(source, taken, report),
        last_seq=len(transcript.entries),
        **_session_fields(transcript, store),
    )
    messages = [
        _message_row(session, seq, entry, source.inputs[entry.entry_id])
        for seq, entry in enumerate(transcript.entries, start=1)
        if entry.kind == "message"
    ]
    message_tokens = add_running_tokens(messages, before=0)
    Message.objects.bulk_create(messages)
    by_entry = {message.entry_id: message for message in messages}
    compactions = [
        _compaction_row(session, seq, entry, by_entry)
        for seq, entry in enumerate(transcript.entries, start=1)
        if entry.kind == "compaction"
    ]
    CompactionEntry.objects.bulk_create(compactions)
    # auto_now/auto_now_add would stamp the import time; keep the workspace's times instead.
    Session.objects.filter(pk=session.pk).update(
        created_at=transcript.created_at,
        updated_at=_ms(store.get("updatedAt")) or transcript.created_at,
        transcript_bytes=stored_content_bytes(session),
        message_tokens=message_tokens,
    )
    after_transcript_change(session)
    report.sessions += 1
    report.messages += len(messages)
    report.compactions += len(compactions)
    report.skipped.update(transcript.skipped)
    report.notes += list(transcript.notes)


def _session_uuid(source: SessionFile, taken: set[uuid.UUID], report: ImportReport) -> uuid.UUID:
    """Keep the transcript's session id unless it is not a UUID or another session already has it."""
    for candidate in (source.transcript.session_id, source.store.get("sessionId")):
        try:
            value = uuid.UUID(str(candidate))
        except ValueError:
            continue
        if value not in taken and not Session.objects.filter(session_uuid=value).exists():
            taken.add(value)
            return value
        report.notes.append(
            f"session {source.key!r}: id {value} is already used by another session; given a new id"
        )
        break
    value = uuid.uuid4()
    taken.add(value)
    return value


def _session_fields(transcript: ParsedTranscript, store: JSONObject) -> SessionFields:
    total = _count(store.get("totalTokens"))
    fresh = store.get("totalTokensFresh")
    names = (store.get("label"), store.get("displayName"), transcript.title)
    label = next((name for name in names if isinstance(name, str) and name), "")
    compactions = sum(1 for entry in transcript.entries if entry.kind == "compaction")
    compaction_count = _count(store.get("compactionCount"))
    return {
        "title": label[:200],
        "total_tokens": total,
        # OpenClaw treats a missing totalTokensFresh as fresh (resolveFreshSessionTotalTokens).
        "total_tokens_fresh": fresh if isinstance(fresh, bool) else total is not None,
        "compaction_count": compaction_count if compaction_count is not None else compactions,
        "memory_flush_at": _ms(store.get("memoryFlushAt")),
        "memory_flush_compaction_count": _count(store.get("memoryFlushCompactionCount")),
        "last_cache_touch_at": _ms(transcript.last_cache_touch_ms),
        "last_usage": _last_usage(store),
    }


def _last_usage(store: JSONObject) -> JSONObject | None:
    names = {
        "inputTokens": "input",
        "outputTokens": "output",
        "cacheRead": "cacheRead",
        "cacheWrite": "cacheWrite",
    }
    usage = {ours: store[theirs] for theirs, ours in names.items() if _count(store.get(theirs)) is not None}
    return usage or None


def _count(value: Any) -> int | None:
    """A non-negative count from sessions.json (None when absent or not one); refuse one no column holds."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        return None
    if not math.isfinite(value) or value > MAX_COUNT:
        raise WorkspaceImportError(
            f"sessions/sessions.json: the count {value!r} is out of range (0 to {MAX_COUNT})"
        )
    return int(value)


def _ms(value: Any) -> datetime | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < math.inf:
        return None
    try:
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _message_row(session: Session, seq: int, entry: ParsedEntry, item: MessageInput) -> Message:
    return message_row(
        session,
        item,
        seq=seq,
        entry_id=entry.entry_id,
        silent=entry.silent,
        flush_turn=entry.flush_turn,
        created_at=entry.timestamp,
    )


def _compaction_row(
    session: Session, seq: int, entry: ParsedEntry, by_entry: dict[str, Message]
) -> CompactionEntry:
    return CompactionEntry(
        session=session,
        seq=seq,
        entry_id=entry.entry_id,
        summary=entry.summary,
        first_kept=by_entry.get(entry.first_kept_entry_id),
        first_kept_entry_id=entry.first_kept_entry_id,
        tokens_before=entry.tokens_before,
        tokens_after=entry.tokens_after,
        trigger=entry.trigger,
        details=entry.details,
        from_hook=entry.from_hook,
        offline=entry.offline,
        created_at=entry.timestamp,
    )
