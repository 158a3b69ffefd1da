"""OpenClaw's transcript format (Pi `SessionManager`, version 3): shared constants and the reader.

`parse_transcript` turns a ``<session>.jsonl`` file into the messages and compaction entries of its
active branch (docs/openclaw-behaviour.md §1.1 B), in the shapes our importer stores. It accepts what
OpenClaw itself writes: extension entries (``custom``, ``model_change``, labels, ...) are skipped and
counted, Pi-only message roles are mapped to what Pi's ``convertToLlm`` sends the model.

Pure: no Django import, so it is tested without a database.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from openclaw_site.guards.json_input import JsonInputError, loads_checked
from providers.json_types import JSONObject
from sessions_app.messages import MESSAGE_FIELDS, MessageError, epoch_ms, parse_timestamp, text_of
from sessions_app.turn.silent import is_silent_reply_text

CURRENT_VERSION = 3  # Pi CURRENT_SESSION_VERSION
# Version 2 differs only by the old "hookMessage" role (Pi migrateV2ToV3); version 1 has no ids.
READABLE_VERSIONS = (2, 3)
ENTRY_ID_LENGTH = 8

# Our `system` role has no Pi equivalent. We write it as a Pi `custom` message of this type, which
# Pi sends to the model as user text (the closest it has) and which we map back to `system`.
SYSTEM_CUSTOM_TYPE = "openclaw-site.system"
# OpenClaw's cache-touch marker (custom entry, src/agents/pi-embedded-runner/run/attempt.thread-helpers.ts).
CACHE_TTL_CUSTOM_TYPE = "openclaw.cache-ttl"
# Pi core/messages.ts: how branch summaries reach the model.
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"

SKIPPED_ENTRY_TYPES = frozenset({"model_change", "thinking_level_change", "label", "session_info", "custom"})
TRIGGERS = ("threshold", "overflow", "manual", "budget")
# Our exports put this in the header and mark silent entries with "silent": true. Files without it
# (OpenClaw's own) only show silence by content: the flush turn and bare NO_REPLY answers.
EXPORTER_KEY, EXPORTER = "exportedBy", "openclaw-site"
# Start of OpenClaw's memory-flush prompts (docs/openclaw-behaviour.md §2, DEFAULT_MEMORY_FLUSH_PROMPT and the
# system variant).
FLUSH_PROMPT_START = "Pre-compaction memory flush"


class TranscriptError(ValueError):
    """The file is not a readable transcript; the message names the file and line."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        where = f"{source} line {line}" if line else source
        super().__init__(f"{where}: {message}")
        self.source = source
        self.line = line


@dataclass(frozen=True)
class ParsedEntry:
    """One entry of the active branch, ready to store as a Message or a CompactionEntry."""

    kind: str  # "message" or "compaction"
    entry_id: str
    timestamp: datetime
    line: int
    message: JSONObject | None = None  # input for sessions_app.messages.validate_message
    silent: bool = False
    flush_turn: bool = False  # part of a memory-flush turn: stored, never in the model's context
    summary: str = ""
    first_kept_entry_id: str = ""
    tokens_before: int = 0
    tokens_after: int | None = None
    trigger: str = "threshold"
    details: object = None
    from_hook: bool = False
    offline: bool = False


@dataclass(frozen=True)
class ParsedTranscript:
    session_id: str
    created_at: datetime
    cwd: str
    entries: tuple[ParsedEntry, ...]
    title: str = ""
    last_cache_touch_ms: int | None = None
    skipped: Counter[str] = field(default_factory=Counter)
    notes: tuple[str, ...] = ()


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 in UTC with a ``Z`` like Pi's ``toISOString()``, keeping microseconds so a round trip is exact."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dumps_line(data: Mapping[str, object]) -> str:
    """One JSONL line the way Pi writes it (``JSON.stringify``: compact, non-ASCII as is)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"


def parse_transcript(text: str, *, source: str) -> ParsedTranscript:
    """Read a transcript and return its active branch (leaf to root by ``parentId``), or raise TranscriptError."""
    rows = _json_rows(text, source)
    if not rows:
        raise TranscriptError(source, None, "the file is empty; a transcript starts with a session header")
    header_line, header = rows[0]
    session_id, created_at, cwd = _header(header, source, header_line)
    entries = _entries(rows[1:], source)
    path = _active_branch(entries, source)
    reader = _BranchReader(source, explicit_silent=header.get(EXPORTER_KEY) == EXPORTER)
    parsed = reader.read(path)
    reader.skipped["off_branch"] += len(entries) - len(path)
    return ParsedTranscript(
        session_id=session_id,
        created_at=created_at,
        cwd=cwd,
        entries=tuple(parsed),
        title=reader.title,
        last_cache_touch_ms=reader.cache_touch_ms,
        skipped=+reader.skipped,
        notes=tuple(reader.notes),
    )


def _json_rows(text: str, source: str) -> list[tuple[int, JSONObject]]:
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            data = loads_checked(line)
        except JsonInputError as error:
            raise TranscriptError(source, number, error.message) from None
        except json.JSONDecodeError as error:
            raise TranscriptError(source, number, f"not valid JSON ({error.msg})") from None
        if not isinstance(data, dict):
            raise TranscriptError(source, number, "each line must be a JSON object")
        rows.append((number, data))
    return rows


def _header(header: JSONObject, source: str, line: int) -> tuple[str, datetime, str]:
    if header.get("type") != "session" or not isinstance(header.get("id"), str) or not header["id"]:
        raise TranscriptError(source, line, 'the first line must be the header {"type":"session","id":...}')
    version = header.get("version", 1)
    if version not in READABLE_VERSIONS:
        raise TranscriptError(
            source,
            line,
            f"transcript version {version!r} is not supported (need {CURRENT_VERSION}; "
            "open the session once in OpenClaw to migrate it)",
        )
    created_at = _timestamp(header.get("timestamp"), source, line)
    cwd = header.get("cwd")
    return str(header["id"]), created_at, cwd if isinstance(cwd, str) else ""


def _timestamp(value: object, source: str, line: int) -> datetime:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise TranscriptError(source, line, "timestamp is missing")
    try:
        parsed = parse_timestamp(value)
    except MessageError as error:
        raise TranscriptError(source, line, error.message) from None
    assert parsed is not None
    return parsed


def _entries(rows: list[tuple[int, JSONObject]], source: str) -> list[tuple[int, JSONObject]]:
    seen: set[str] = set()
    for line, entry in rows:
        kind, entry_id, parent = entry.get("type"), entry.get("id"), entry.get("parentId")
        if not isinstance(kind, str) or not kind:
            raise TranscriptError(source, line, "entry has no type")
        if kind == "session":
            raise TranscriptError(source, line, "a second session header (concatenated transcripts?)")
        if not isinstance(entry_id, str) or not entry_id:
            raise TranscriptError(source, line, "entry has no id (version 1 transcripts are not supported)")
        if parent is not None and not isinstance(parent, str):
            raise TranscriptError(source, line, "parentId must be a string or null")
        if entry_id in seen:
            raise TranscriptError(source, line, f"duplicate entry id {entry_id!r}")
        seen.add(entry_id)
        _timestamp(entry.get("timestamp"), source, line)
    return rows


def _active_branch(rows: list[tuple[int, JSONObject]], source: str) -> list[tuple[int, JSONObject]]:
    """Walk from the leaf (the last entry) to the root, as Pi's buildSessionContext does."""
    if not rows:
        return []
    by_id = {entry["id"]: (line, entry) for line, entry in rows}
    path = []
    current: tuple[int, JSONObject] | None = rows[-1]
    while current is not None:
        path.append(current)
        line, entry = current
        parent = entry.get("parentId")
        if parent is None:
            break
        if parent not in by_id:
            raise TranscriptError(source, line, f"parentId {parent!r} names no entry in the file")
        current = by_id[parent]
        if len(path) > len(rows):
            raise TranscriptError(source, line, "the parentId chain loops")
    path.reverse()
    return path


class _BranchReader:
    """Convert the entries of the active branch, collecting what was skipped and why."""

    def __init__(self, source: str, *, explicit_silent: bool) -> None:
        self.source = source
        self.explicit_silent = explicit_silent
        self.in_flush_turn = False
        self.last_was_flush = False
        self.skipped: Counter[str] = Counter()
        self.notes: list[str] = []
        self.title = ""
        self.cache_touch_ms: int | None = None

    def read(self, path: list[tuple[int, JSONObject]]) -> list[ParsedEntry]:
        kept: list[ParsedEntry] = []
        order = [str(entry["id"]) for _, entry in path]  # checked by _entries
        for line, entry in path:
            parsed = self._convert(line, entry)
            if parsed is not None:
                kept.append(parsed)
        kept = self._retarget_first_kept(kept, order)
        return _fit_entry_ids(kept, self.notes)

    def _convert(self, line: int, entry: JSONObject) -> ParsedEntry | None:
        kind = str(entry["type"])  # checked by _entries
        timestamp = _timestamp(entry["timestamp"], self.source, line)
        if kind == "message":
            return self._message(line, entry, timestamp)
        if kind == "compaction":
            return self._compaction(line, entry, timestamp)
        if kind == "custom_message":
            return self._custom_message(line, entry, timestamp)
        if kind == "branch_summary":
            return self._branch_summary(line, entry, timestamp)
        self._note_skipped_entry(kind, entry)
        return None

    def _note_skipped_entry(self, kind: str, entry: JSONObject) -> None:
        if kind == "custom":
            custom_type = entry.get("customType")
            self.skipped[f"custom:{custom_type}"] += 1
            if custom_type == CACHE_TTL_CUSTOM_TYPE:
                self._cache_touch(entry.get("data"))
            return
        if kind == "session_info" and isinstance(name := entry.get("name"), str):
            self.title = name
        self.skipped[kind if kind in SKIPPED_ENTRY_TYPES else f"unknown:{kind}"] += 1

    def _cache_touch(self, data: object) -> None:
        stamp = data.get("timestamp") if isinstance(data, dict) else None
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
            self.cache_touch_ms = int(stamp)

    def _message(self, line: int, entry: JSONObject, timestamp: datetime) -> ParsedEntry | None:
        message = entry.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise TranscriptError(self.source, line, "a message entry needs a message with a role")
        converted = self._message_input(message)
        if converted is None:
            return None
        when = _message_time(timestamp, message.get("timestamp"))
        silent = self._silent(entry, converted)
        flush_turn = entry.get("flushTurn") is True if self.explicit_silent else self.last_was_flush
        return ParsedEntry(
            kind="message",
            entry_id=str(entry["id"]),
            timestamp=when,
            line=line,
            message=converted,
            silent=silent,
            flush_turn=flush_turn,
        )

    def _silent(self, entry: JSONObject, message: JSONObject) -> bool:
        self.last_was_flush = False
        if self.explicit_silent:
            return entry.get("silent") is True
        role, text = message.get("role"), text_of(message.get("content"))
        if role == "user" and text.lstrip().startswith(FLUSH_PROMPT_START):
            self.in_flush_turn = True
        if self.in_flush_turn:
            self.last_was_flush = True
            # The flush turn runs until the assistant stops calling tools.
            self.in_flush_turn = not (role == "assistant" and message.get("stopReason") != "toolUse")
            return True
        return role == "assistant" and is_silent_reply_text(text)

    def _message_input(self, message: JSONObject) -> JSONObject | None:
        role = message["role"]
        if role in ("user", "assistant", "toolResult", "system"):
            return self._known_fields(message)
        if role in ("custom", "hookMessage"):
            return _from_custom(
                message.get("customType"),
                message.get("content"),
                message.get("display"),
                message.get("details"),
                origin=f"{role} message",
                mapped=self.skipped,
            )
        if role == "bashExecution":
            return self._bash_execution(message)
        if role == "branchSummary":
            self.skipped["mapped:branchSummary->user"] += 1
            return _branch_summary_message(
                message.get("summary"), message.get("fromId"), origin="branchSummary"
            )
        # compactionSummary is what buildSessionContext derives from a compaction entry; the entry itself
        # is imported, so the message would be a duplicate.
        self.skipped[f"message:{role}"] += 1
        return None

    def _known_fields(self, message: JSONObject) -> JSONObject:
        dropped = sorted(set(message) - MESSAGE_FIELDS - {"timestamp"})
        for name in dropped:
            self.skipped[f"dropped_field:{message['role']}.{name}"] += 1
        return {key: value for key, value in message.items() if key in MESSAGE_FIELDS}

    def _bash_execution(self, message: JSONObject) -> JSONObject | None:
        if message.get("excludeFromContext"):  # Pi's "!!" commands never reach the model
            self.skipped["message:bashExecution(excluded from context)"] += 1
            return None
        self.skipped["mapped:bashExecution->user"] += 1
        details = {
            key: message.get(key)
            for key in ("command", "exitCode", "cancelled", "truncated", "fullOutputPath")
        }
        return {
            "role": "user",
            "content": [{"type": "text", "text": bash_execution_text(message)}],
            "details": {"openclawRole": "bashExecution", **details},
        }

    def _compaction(self, line: int, entry: JSONObject, timestamp: datetime) -> ParsedEntry:
        summary, first_kept, before = (
            entry.get("summary"),
            entry.get("firstKeptEntryId"),
            entry.get("tokensBefore"),
        )
        if not isinstance(summary, str) or not isinstance(first_kept, str):
            raise TranscriptError(self.source, line, "a compaction entry needs summary and firstKeptEntryId")
        if not isinstance(before, (int, float)) or isinstance(before, bool) or before < 0:
            raise TranscriptError(self.source, line, "a compaction entry needs tokensBefore (a number >= 0)")
        after = entry.get("tokensAfter")
        given = entry.get("trigger")
        trigger = given if isinstance(given, str) and given in TRIGGERS else "threshold"
        return ParsedEntry(
            kind="compaction",
            entry_id=str(entry["id"]),
            timestamp=timestamp,
            line=line,
            summary=summary,
            first_kept_entry_id=first_kept,
            tokens_before=int(before),
            tokens_after=int(after)
            if isinstance(after, (int, float)) and not isinstance(after, bool)
            else None,
            trigger=trigger,
            details=_details(entry.get("details")),
            from_hook=entry.get("fromHook") is True,
            offline=entry.get("offline") is True,
        )

    def _custom_message(self, line: int, entry: JSONObject, timestamp: datetime) -> ParsedEntry:
        message = _from_custom(
            entry.get("customType"),
            entry.get("content"),
            entry.get("display"),
            entry.get("details"),
            origin="custom_message entry",
            mapped=self.skipped,
        )
        return ParsedEntry(
            kind="message",
            entry_id=str(entry["id"]),
            timestamp=timestamp,
            line=line,
            message=message,
            silent=self._silent(entry, message),
        )

    def _branch_summary(self, line: int, entry: JSONObject, timestamp: datetime) -> ParsedEntry | None:
        if not entry.get("summary"):  # Pi emits a branch summary into context only when it has text
            self.skipped["branch_summary(empty)"] += 1
            return None
        self.skipped["mapped:branch_summary->user"] += 1
        message = _branch_summary_message(entry.get("summary"), entry.get("fromId"), origin="branch_summary")
        return ParsedEntry(
            kind="message", entry_id=str(entry["id"]), timestamp=timestamp, line=line, message=message
        )

    def _retarget_first_kept(self, kept: list[ParsedEntry], order: list[str]) -> list[ParsedEntry]:
        """Point each compaction's firstKeptEntryId at a kept message.

        Pi's cut point can land on a non-message entry (docs/openclaw-behaviour.md §1.5 step 5); those are skipped here, and
        since they contribute nothing to the context, the next message on the branch keeps the same view.
        """
        message_ids = {e.entry_id for e in kept if e.kind == "message"}
        position = {entry_id: index for index, entry_id in enumerate(order)}
        result = []
        for entry in kept:
            if entry.kind == "compaction" and entry.first_kept_entry_id not in message_ids:
                entry = self._retarget(entry, kept, position)
            result.append(entry)
        return result

    def _retarget(self, entry: ParsedEntry, kept: list[ParsedEntry], position: dict[str, int]) -> ParsedEntry:
        start = position.get(entry.first_kept_entry_id)
        if start is None:
            # Pi then keeps nothing from before the compaction; pointing at the compaction itself says the same.
            self.notes.append(
                f"{self.source}: compaction {entry.entry_id} keeps from {entry.first_kept_entry_id!r}, "
                "which is not on the active branch; it now keeps only what follows it"
            )
            return replace(entry, first_kept_entry_id=entry.entry_id)
        end = position[entry.entry_id]
        following = [e for e in kept if e.kind == "message" and start < position[e.entry_id] < end]
        target = following[0].entry_id if following else entry.first_kept_entry_id
        return replace(entry, first_kept_entry_id=target)


def _details(value: object) -> object:
    # Pi leaves details undefined when there are none; we store an empty object (the column's default).
    return {} if value is None else value


def _message_time(entry_time: datetime, message_ms: object) -> datetime:
    """Prefer the message's own epoch-ms time; use the entry's ISO time when it is the same millisecond.

    Our exports write both from one value, and the ISO string keeps the microseconds.
    """
    if not isinstance(message_ms, (int, float)) or isinstance(message_ms, bool):
        return entry_time
    if epoch_ms(entry_time) == int(message_ms):
        return entry_time
    try:
        return datetime.fromtimestamp(message_ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return entry_time


def _from_custom(
    custom_type: object,
    content: object,
    display: object,
    details: object,
    *,
    origin: str,
    mapped: Counter[str],
) -> JSONObject:
    if custom_type == SYSTEM_CUSTOM_TYPE:
        message = {"role": "system", "content": content}
        if details is not None:
            message["details"] = details
        return message
    # Pi's convertToLlm sends custom messages to the model as user messages; keep what makes them custom.
    mapped[f"mapped:{origin.split()[0]}->user"] += 1
    return {
        "role": "user",
        "content": content if content is not None else "",
        "details": {
            "openclawRole": "custom",
            "customType": custom_type,
            "display": display,
            "details": details,
        },
    }


def _branch_summary_message(summary: object, from_id: object, *, origin: str) -> JSONObject:
    text = f"{BRANCH_SUMMARY_PREFIX}{summary if isinstance(summary, str) else ''}{BRANCH_SUMMARY_SUFFIX}"
    return {
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "details": {"openclawRole": origin, "fromId": from_id},
    }


def bash_execution_text(message: JSONObject) -> str:
    """The user text Pi's ``bashExecutionToText`` gives the model for a ``!command``."""
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif exit_code not in (None, 0):
        text += f"\n\nCommand exited with code {exit_code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


def _fit_entry_ids(entries: list[ParsedEntry], notes: list[str]) -> list[ParsedEntry]:
    """Give entries with Pi's full-UUID fallback ids (after 100 collisions) a fresh 8-hex id."""
    taken = {e.entry_id for e in entries}
    renamed: dict[str, str] = {}
    for entry in entries:
        if len(entry.entry_id) != ENTRY_ID_LENGTH:
            renamed[entry.entry_id] = _fresh_id(taken)
    if not renamed:
        return entries
    notes.append(f"{len(renamed)} entry id(s) longer than {ENTRY_ID_LENGTH} characters were given new ids")
    return [
        replace(
            e,
            entry_id=renamed.get(e.entry_id, e.entry_id),
            first_kept_entry_id=renamed.get(e.first_kept_entry_id, e.first_kept_entry_id),
        )
        for e in entries
    ]


def _fresh_id(taken: set[str]) -> str:
    while True:
        candidate = secrets.token_hex(ENTRY_ID_LENGTH // 2)
        if candidate not in taken:
            taken.add(candidate)
            return candidate
