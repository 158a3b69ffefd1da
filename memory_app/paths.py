"""Which paths a memory document may have (pure).

OpenClaw indexes `MEMORY.md`, `memory.md` and `memory/**/*.md` (docs/openclaw-behaviour.md §4.2); we
accept exactly those, so an export is always a valid OpenClaw workspace. A path must also mean the
same thing on every file system and to every reader: no characters that Unicode normalisation
changes (lookalikes of "." and "/"), no control or bidi characters, no percent-encoding, no Windows
device names (docs/design.md, Limits and refusals). And it must fit the export mirror's file
system: no segment over `MAX_SEGMENT_BYTES`, and no path that clashes with another document's
(`mirror_clash`: a file where another needs a folder, or two paths that differ only in case).
"""

from __future__ import annotations

import re
import unicodedata

ROOT_FILES = ("MEMORY.md", "memory.md")
MAX_PATH_LENGTH = 255
# File systems allow 255 bytes per name, and the mirror writes each file through a hidden sibling
# ".<name>.<8 random characters>.tmp" (sessions_app/workspace/storage.py): 14 bytes more.
MAX_SEGMENT_BYTES = 240
# Well inside Linux's PATH_MAX (4096) with the export root, team and assistant in front.
MAX_PATH_BYTES = 1024
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
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise InvalidPath(f"path is longer than {MAX_PATH_BYTES} bytes in UTF-8")
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
    if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
        raise InvalidPath(
            f"path segment {segment[:40]!r}… is {len(segment.encode('utf-8'))} bytes in UTF-8; a file or "
            f"folder name may have at most {MAX_SEGMENT_BYTES}, so that the export mirror can hold it"
        )
    if segment.endswith("."):
        raise InvalidPath(f"path segment {segment!r} ends with '.', which Windows drops")
    if segment.split(".")[0].upper() in WINDOWS_DEVICE_NAMES:
        raise InvalidPath(f"{segment!r} is a reserved device name on Windows")


def mirror_ancestors(path: str) -> list[str]:
    """The folders above ``path`` that a mirror must create ("memory/a/b.md": "memory", "memory/a")."""
    segments = path.split("/")
    return ["/".join(segments[:end]) for end in range(1, len(segments))]


def mirror_clash(path: str, others: list[str]) -> str | None:
    """Return why ``path`` cannot live in a mirror beside the documents ``others``, or None.

    A mirror is a directory tree, possibly on a case-insensitive file system (macOS, Windows): a
    document cannot be a file where another needs a folder (``memory/x.md`` and
    ``memory/x.md/y.md``), nor differ from another only in case (``memory/A.md``, ``memory/a.md``).
    """
    folded = path.casefold()
    folders = {folder.casefold() for folder in mirror_ancestors(path)}
    for other in others:
        other_folded = other.casefold()
        if other == path:
            continue
        if other_folded == folded:
            return (
                f"{other!r} already exists and differs only in case; case-insensitive file systems hold one"
            )
        if other_folded in folders:
            return f"{other!r} is a document, so it cannot also be a folder holding {path!r}"
        if other_folded.startswith(folded + "/"):
            return f"{other!r} is inside a folder named {path!r}, so {path!r} cannot also be a file"
    return None
