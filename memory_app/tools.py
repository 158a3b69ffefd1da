"""The memory tools an assistant can call: `memory_search` (memory_app.search.tool) and `memory_get`.

`TOOL_SPECS` are bare `{name, description, parameters}` specs (providers.openai_chat wraps them
for OpenAI); `run_memory_tool` executes one call and returns the tool-result text, which is
OpenClaw's `jsonResult` payload: the JSON pretty-printed with two spaces
(docs/openclaw-behaviour.md §4.10). Tool errors are answers, never exceptions: the model reads them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from memory_app.models import MemoryDocument
from memory_app.paths import InvalidPath, validate_memory_path
from memory_app.search.tool import MEMORY_SEARCH_SPEC, memory_search
from memory_app.selectors import current_revision_id
from openclaw_site.models import Assistant
from providers.message_types import ToolSpec

# read-file-shared.ts (later upstream): default window of a read without `lines`, and its budget.
DEFAULT_MEMORY_READ_LINES = 120
DEFAULT_MEMORY_READ_MAX_CHARS = 12_000

MEMORY_GET_SPEC: ToolSpec = {
    "name": "memory_get",
    "description": (
        "Safe snippet read from MEMORY.md or memory/*.md with optional from/lines; use after "
        "memory_search to pull only the needed lines and keep context small."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "MEMORY.md or memory/<name>.md"},
            "from": {"type": "integer", "minimum": 1, "description": "Start line (1-based)"},
            "lines": {"type": "integer", "minimum": 1, "description": "Number of lines to read"},
        },
        "required": ["path"],
    },
}

TOOL_SPECS: list[ToolSpec] = [MEMORY_SEARCH_SPEC, MEMORY_GET_SPEC]


# `memory_get`'s answer (`MemoryReadResult`, or a refusal with `disabled` and `error`); the MCP
# tool's adds the newest revision. "from" is a Python keyword, hence the functional form.
MemoryReadAnswer = TypedDict(
    "MemoryReadAnswer",
    {
        "text": str,
        "path": str,
        "from": NotRequired[int],
        "lines": NotRequired[int],
        "truncated": NotRequired[bool],
        "nextFrom": NotRequired[int],
        "disabled": NotRequired[bool],
        "error": NotRequired[str],
        "revision": NotRequired[int | None],
    },
)


@dataclass(frozen=True)
class MemoryRead:
    """A `memory_get` answer (`MemoryReadResult`)."""

    text: str
    path: str
    start: int
    lines: int
    truncated: bool = False
    next_from: int | None = None

    def as_dict(self) -> MemoryReadAnswer:
        data: MemoryReadAnswer = {
            "text": self.text,
            "path": self.path,
            "from": self.start,
            "lines": self.lines,
        }
        if self.truncated:
            data["truncated"] = True
        if self.next_from is not None:
            data["nextFrom"] = self.next_from
        return data


def json_result(payload: Mapping[str, object]) -> str:
    """Return a tool payload as OpenClaw's `jsonResult` text."""
    return json.dumps(payload, indent=2, ensure_ascii=False)


def run_memory_tool(
    name: str, arguments: Mapping[str, object], *, assistant: Assistant, session_key: str | None = None
) -> str:
    """Run one memory tool call for an assistant and return the tool-result text.

    `session_key` is the calling session's key (memory_search's citations mode reads it).
    """
    if name == "memory_search":
        return memory_search(arguments, assistant=assistant, session_key=session_key)
    if name == "memory_get":
        return memory_get(arguments, assistant=assistant)
    return json_result({"error": f"Unknown memory tool: {name}"})


def memory_get(arguments: Mapping[str, object], *, assistant: Assistant) -> str:
    """Read a line window of a memory document (`createMemoryGetTool` + `buildMemoryReadResult`)."""
    return json_result(memory_get_payload(arguments, assistant=assistant))


def memory_get_payload(
    arguments: Mapping[str, object], *, assistant: Assistant, with_revision: bool = False
) -> MemoryReadAnswer:
    """Return `memory_get`'s answer as a dict; ``with_revision`` adds the document's newest revision id.

    The MCP `memory_get` asks for the revision: it is the base an agent names to replace the document.
    """
    raw_path = arguments.get("path")
    path = raw_path.strip() if isinstance(raw_path, str) else ""
    try:
        start, count = _int_param(arguments, "from"), _int_param(arguments, "lines")
        path = validate_memory_path(path.removeprefix("./"))
    except (InvalidPath, ValueError) as error:
        return {"path": path, "text": "", "disabled": True, "error": _error_text(error, path)}
    document = MemoryDocument.objects.filter(assistant=assistant, path=path).only("content").first()
    if document is None:
        missing: MemoryReadAnswer = {"text": "", "path": path}  # a missing file reads as empty (4.10)
        return {**missing, "revision": None} if with_revision else missing
    payload = build_memory_read(document.content, path=path, start=start, count=count).as_dict()
    if with_revision:
        payload["revision"] = current_revision_id(document=document)
    return payload


def _error_text(error: Exception, path: str) -> str:
    """OpenClaw answers "path required" for anything outside the memory files; we add why."""
    if not isinstance(error, InvalidPath):
        return str(error)
    return "path required" if not path else f"path required ({error})"


def _int_param(arguments: Mapping[str, object], key: str) -> int | None:
    """Read an optional integer parameter; floats with no fraction and digit strings are accepted."""
    value = arguments.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{key} must be an integer")
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    if isinstance(value, (int, float)) and float(value).is_integer():
        return int(value)
    raise ValueError(f"{key} must be an integer")


def build_memory_read(
    content: str,
    *,
    path: str,
    start: int | None = None,
    count: int | None = None,
    default_lines: int = DEFAULT_MEMORY_READ_LINES,
    max_chars: int = DEFAULT_MEMORY_READ_MAX_CHARS,
) -> MemoryRead:
    """Select lines, fit them to the char budget and add the continuation notice (read-file-shared.ts)."""
    file_lines = content.split("\n")
    first = max(1, start or 1)
    requested = max(1, count if count is not None else default_lines)
    selected = file_lines[first - 1 : first - 1 + requested]
    text, included, hard_cut = _fit_lines(selected, max(1, max_chars))
    more_remain = first - 1 + len(selected) < len(file_lines)
    cap_truncated = hard_cut or included < len(selected)
    next_from = first + included if not hard_cut and (more_remain or included < len(selected)) else None
    truncated = cap_truncated or more_remain
    if truncated and text:
        text += _continuation_notice(next_from)
    return MemoryRead(
        text=text, path=path, start=first, lines=included, truncated=truncated, next_from=next_from
    )


def _fit_lines(lines: list[str], max_chars: int) -> tuple[str, int, bool]:
    """Drop whole lines from the end until the text fits; hard-cut a single oversized line."""
    if not lines:
        return "", 0, False
    included = len(lines)
    text = "\n".join(lines)
    while included > 1 and len(text) > max_chars:
        included -= 1
        text = "\n".join(lines[:included])
    if len(text) <= max_chars:
        return text, included, False
    return text[:max_chars], 1, True


def _continuation_notice(next_from: int | None) -> str:
    if next_from is not None:
        return f"\n\n[More content available. Use from={next_from} to continue.]"
    return "\n\n[More content available. Requested excerpt exceeded the default maxChars budget.]"
