"""Text a model sent, made storable: no NUL, no lone surrogate (pure).

A model's reply is untrusted text (a prompt injection can make it write anything). PostgreSQL's
``text`` and ``jsonb`` refuse U+0000, and UTF-8 cannot encode a lone surrogate, so either one in a
reply, its reasoning or a tool call's arguments would fail the write that stores it, after the
client had been shown it. Every model answer passes through here as it arrives, before anyone
sees it: NULs are removed and a lone surrogate becomes U+FFFD, the replacement character
(docs/design.md, Limits and refusals). A proper surrogate pair is joined into its character.
"""

from __future__ import annotations

import re
from typing import Any

_NUL = "\x00"
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` without NULs, its lone surrogates replaced by U+FFFD."""
    if _NUL in text:
        text = text.replace(_NUL, "")
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable_value(value: Any) -> Any:
    """A parsed JSON value (tool-call arguments) with every string and key made storable."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(str(key)): storable_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable_value(item) for item in value]
    return value
