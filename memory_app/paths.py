"""Which paths a memory document may have (pure).

OpenClaw indexes `MEMORY.md`, `memory.md` and `memory/**/*.md` (docs/openclaw-behaviour.md §4.2); we
accept exactly those, so an export is always a valid OpenClaw workspace. A path must also mean the
same thing on every file system and to every reader: no characters that Unicode normalisation
changes (lookalikes of "." and "/"), no control or bidi characters, no percent-encoding, no Windows
device names (docs/design.md, Limits and refusals).
"""

from __future__ import annotations

import re
import unicodedata

ROOT_FILES = ("MEMORY.md", "memory.md")
MAX_PATH_LENGTH = 255
_SEGMENT = re.compile(r"^[^\x00-\x1f\\/:*?\"<>|]+$")
DAILY_NOTE = re.compile(r"^memory/(\d{4})-(\d{2})-(\d{2})\.md$")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# Control, format (bidi overrides, zero-width), surrogate and line/paragraph separator characters.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
WINDOWS_DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL"} | {f"COM{n}" for n in range(1, 10)} | {f"LPT{n}" for n in range(1, 10)}
)


class InvalidPath(ValueError):
    """A memory path is not allowed; the message says why."""


def validate_memory_path(path: object) -> str:
    """Return ``path`` if it is an allowed memory path, else raise InvalidPath with the reason."""
    if not isinstance(path, str) or not path:
        raise InvalidPath("path is required")
    if len(path) > MAX_PATH_LENGTH:
        raise InvalidPath(f"path is longer than {MAX_PATH_LENGTH} characters")
    _check_characters(path)
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
        _check_segment(segment)
    if segments[-1] == ".md":
        raise InvalidPath("the file name is empty")
    return path


def _check_characters(path: str) -> None:
    for char in path:
        if unicodedata.category(char) in _INVISIBLE_CATEGORIES:
            raise InvalidPath(f"control or invisible character U+{ord(char):04X} is not allowed in a path")
    if unicodedata.normalize("NFKC", path) != path:
        raise InvalidPath(
            "the path contains characters that Unicode normalisation (NFKC) changes, such as lookalikes "
            "of '.' (U+2024, U+FF0E) or fullwidth letters; use the plain characters"
        )
    if _PERCENT_ESCAPE.search(path):
        raise InvalidPath(
            "percent-encoded sequences (such as %2e) are not allowed in a path; write the characters"
        )


def _check_segment(segment: str) -> None:
    if segment.endswith("."):
        raise InvalidPath(f"path segment {segment!r} ends with '.', which Windows drops")
    if segment.split(".")[0].upper() in WINDOWS_DEVICE_NAMES:
        raise InvalidPath(f"{segment!r} is a reserved device name on Windows")
