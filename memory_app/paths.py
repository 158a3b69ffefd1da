"""Which paths a memory document may have (pure).

OpenClaw indexes `MEMORY.md`, `memory.md` and `memory/**/*.md` (docs/openclaw-behaviour.md §4.2); we
accept exactly those, so an export is always a valid OpenClaw workspace.
"""

from __future__ import annotations

import re

ROOT_FILES = ("MEMORY.md", "memory.md")
MAX_PATH_LENGTH = 255
_SEGMENT = re.compile(r"^[^\x00-\x1f\\/:*?\"<>|]+$")
DAILY_NOTE = re.compile(r"^memory/(\d{4})-(\d{2})-(\d{2})\.md$")


class InvalidPath(ValueError):
    """A memory path is not allowed; the message says why."""


def validate_memory_path(path: object) -> str:
    """Return ``path`` if it is an allowed memory path, else raise InvalidPath with the reason."""
    if not isinstance(path, str) or not path:
        raise InvalidPath("path is required")
    if len(path) > MAX_PATH_LENGTH:
        raise InvalidPath(f"path is longer than {MAX_PATH_LENGTH} characters")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise InvalidPath("absolute paths are not allowed; use MEMORY.md or memory/<name>.md")
    if "\\" in path:
        raise InvalidPath("use '/' as the separator")
    segments = path.split("/")
    if ".." in segments or "." in segments:
        raise InvalidPath("'..' and '.' segments are not allowed")
    if path in ROOT_FILES:
        return path
    if segments[0] != "memory" or len(segments) < 2:
        raise InvalidPath("only MEMORY.md, memory.md and files under memory/ are memory documents")
    if not path.endswith(".md"):
        raise InvalidPath("memory documents must end in .md")
    for segment in segments[1:]:
        if not segment or not _SEGMENT.match(segment) or segment != segment.strip():
            raise InvalidPath(f"invalid path segment {segment!r}")
    if segments[-1] == ".md":
        raise InvalidPath("the file name is empty")
    return path
