"""NO_REPLY detection for silent turns (docs/openclaw-behaviour.md §2.6, `src/auto-reply/tokens.ts`).

Pure module: no Django. The memory flush turn and any assistant reply that is only the token are
stored with `silent=True` and never shown to users.
"""

from __future__ import annotations

import json
import re

SILENT_REPLY_TOKEN = "NO_REPLY"

_TOKEN = re.escape(SILENT_REPLY_TOKEN)
# Whole payload only (OpenClaw bug reports, docs/openclaw-behaviour.md §2.6): a substantive reply that merely ends with the token is not silent.
_EXACT_RE = re.compile(rf"^\s*{_TOKEN}\s*$", re.IGNORECASE)
# Trailing token after start, whitespace or markdown asterisks; case-sensitive per the reference.
_TRAILING_RE = re.compile(rf"(?:^|\s+|\*+){_TOKEN}\s*$")
# One or more leading tokens where the last is glued to a letter or digit (`NO_REPLYThe ...`).
# [^\W_] is Python's "letter or digit", the equivalent of JS `[\p{L}\p{N}]`.
_LEADING_ATTACHED_RE = re.compile(rf"^\s*(?:{_TOKEN}\s+)*{_TOKEN}(?=[^\W_])", re.IGNORECASE)
_LEADING_RE = re.compile(rf"^(?:\s*{_TOKEN})+\s*", re.IGNORECASE)
_PREFIX_CHARS_RE = re.compile(r"[^A-Z_]")


def is_silent_reply_text(text: str | None) -> bool:
    """Tell whether the whole reply is the silent token or its `{"action":"NO_REPLY"}` envelope."""
    if not text:
        return False
    return bool(_EXACT_RE.match(text)) or _is_silent_envelope(text)


def _is_silent_envelope(text: str) -> bool:
    """Tell whether text is a JSON object whose only key is `action` holding the token."""
    trimmed = text.strip()
    if not (trimmed.startswith("{") and trimmed.endswith("}") and SILENT_REPLY_TOKEN in trimmed):
        return False
    try:
        parsed = json.loads(trimmed)
    except ValueError:
        return False
    if not isinstance(parsed, dict) or list(parsed) != ["action"]:
        return False
    action = parsed["action"]
    return isinstance(action, str) and action.strip() == SILENT_REPLY_TOKEN


def strip_silent_token(text: str) -> str:
    """Remove a trailing token and trim; an empty result means the reply is silent."""
    return _TRAILING_RE.sub("", text, count=1).strip()


def starts_with_silent_token(text: str | None) -> bool:
    """Tell whether text starts with the token glued directly to visible content."""
    if not text:
        return False
    return bool(_LEADING_ATTACHED_RE.match(text))


def strip_leading_silent_token(text: str) -> str:
    """Remove one or more leading tokens (case-insensitive) and trim."""
    return _LEADING_RE.sub("", text, count=1).strip()


def visible_reply_text(text: str) -> str | None:
    """Return what the user sees of a final reply, or None when it is silent (NO_REPLY)."""
    if is_silent_reply_text(text):
        return None
    visible = strip_silent_token(text)
    if starts_with_silent_token(visible):
        visible = strip_leading_silent_token(visible)
    return visible if visible.strip() else (None if text.strip() else "")


def is_silent_reply_prefix_text(text: str | None) -> bool:
    """Tell whether a streamed fragment may be the start of the token, so it can be held back."""
    if not text:
        return False
    trimmed = text.lstrip()
    # Uppercase only, so natural-language "No, ..." is never suppressed.
    if len(trimmed) < 2 or trimmed != trimmed.upper() or _PREFIX_CHARS_RE.search(trimmed):
        return False
    if not SILENT_REPLY_TOKEN.startswith(trimmed):
        return False
    # Bare "NO" is allowed because streaming NO_REPLY emits it transiently; other prefixes need "_".
    return "_" in trimmed or trimmed == "NO"


# --- streaming: what of a reply still being generated may be shown (docs/design.md, Streaming) ---

_TOKEN_PREFIXES = "|".join(re.escape(SILENT_REPLY_TOKEN[:n]) for n in range(len(SILENT_REPLY_TOKEN), 0, -1))
# The whole text so far may still become a silent reply: tokens, then the start of one.
_MAY_BE_SILENT_RE = re.compile(rf"^\s*(?:{_TOKEN}\s*)*(?:{_TOKEN_PREFIXES})?\s*$", re.IGNORECASE)
# The end of the text may still become a trailing token that `strip_silent_token` removes.
_HELD_TAIL_RE = re.compile(rf"[\s*]+(?:{_TOKEN_PREFIXES})?$")
_SILENT_ENVELOPE = json.dumps({"action": SILENT_REPLY_TOKEN}, separators=(",", ":"))
_TAIL_WINDOW = len(SILENT_REPLY_TOKEN) * 4


def streamable_text(text: str) -> str:
    """Return the part of a reply still being generated that may be shown already.

    It is always a start of what `visible_reply_text` will show of the finished reply, so
    a reply that ends up NO_REPLY shows nothing, not even "NO_" (OpenClaw holds back the same
    prefixes, docs/openclaw-behaviour.md §2.6): a text that may still become the token (or its
    JSON envelope), a leading token, and an end that may still become a trailing token are held.
    """
    if _MAY_BE_SILENT_RE.match(text) or _may_be_silent_envelope(text):
        return ""
    body = text.strip()
    if starts_with_silent_token(body):
        body = strip_leading_silent_token(body)
    start = max(0, len(body) - _TAIL_WINDOW)
    held = _HELD_TAIL_RE.search(body, start)
    return body[: held.start()].rstrip() if held else body


def _may_be_silent_envelope(text: str) -> bool:
    compact = "".join(text.split())
    return compact.startswith("{") and _SILENT_ENVELOPE.startswith(compact)


class ReplyStream:
    """A reply arriving in pieces and how much of it the client has been shown."""

    def __init__(self) -> None:
        self.text = ""
        self.shown = ""

    def add(self, piece: str) -> str:
        """Take the next piece of the reply; return the text that may be shown now ("" if none)."""
        self.text += piece
        return self._show(streamable_text(self.text))

    def settle(self, visible: str | None) -> str:
        """Return what is left to show once the reply is complete (`visible`: None when silent)."""
        return self._show(visible or "")

    def _show(self, showable: str) -> str:
        if len(showable) <= len(self.shown) or not showable.startswith(self.shown):
            return ""
        delta, self.shown = showable[len(self.shown) :], showable
        return delta
