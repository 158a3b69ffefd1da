"""What any JSON we accept may hold: a bounded depth and text PostgreSQL can store (pure).

PostgreSQL's ``text`` and ``jsonb`` refuse U+0000, and UTF-8 cannot encode a lone surrogate
(``"\\ud800"`` decodes to one in Python), so either would reach the database and fail there as a
500. Deep nesting exhausts Python's recursion (the parser, ``json.dumps``, the database adapter).
The API's parser (`openclaw_site.guards.parsers`) and the workspace importer both check here, before
anything is written (docs/design.md, Limits and refusals).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_JSON_DEPTH = 64
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class JsonInputError(ValueError):
    """The JSON cannot be accepted: ``code`` is the API error code, ``path`` where it failed."""

    def __init__(self, code: str, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path


def unstorable_text(text: str) -> str | None:
    """Return why ``text`` cannot be stored (a NUL or a lone surrogate), or None when it can."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (U+0000)"
    return f"contains a lone surrogate (U+{ord(found.group()):04X}), which is not valid Unicode text"


def check_json_value(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise JsonInputError if ``value`` nests deeper than ``max_depth`` or holds unstorable text.

    Walks without recursion, so a value built by a parser that allowed deep nesting is still
    checked safely.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, path)
            continue
        if not isinstance(item, (dict, list)):
            continue
        if depth >= max_depth:
            raise JsonInputError(
                "json_too_deep", f"JSON nests deeper than {max_depth} levels.", path=path or "body"
            )
        if isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}.{key}" if path else str(key)
                _check_text(key, child_path)
                stack.append((child, child_path, depth + 1))
        else:
            stack.extend((child, f"{path}[{index}]", depth + 1) for index, child in enumerate(item))


def _check_text(text: str, path: str) -> None:
    reason = unstorable_text(text)
    if reason is not None:
        where = path or "body"
        raise JsonInputError("invalid_text", f"{where} {reason}.", path=where)


def loads_checked(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses deep nesting and unstorable text with JsonInputError.

    Raises ValueError (``json.JSONDecodeError``) for text that is not JSON.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonInputError(
            "json_too_deep", f"JSON nests deeper than {max_depth} levels.", path="body"
        ) from None
    check_json_value(value, max_depth=max_depth)
    return value
