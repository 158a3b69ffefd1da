"""Exact identifiers: extraction, the survival check and the 16000-char cap that protects them.

Pure module. Reproduces OpenClaw's `extractOpaqueIdentifiers`
(src/agents/pi-hooks/compaction-safeguard-quality.ts) and `capCompactionSummary`; beyond
OpenClaw, every identifier of the summarised messages missing from the summary (and from memory)
is appended under `## Exact identifiers`, and the cap cuts only the text before that section
(docs/openclaw-behaviour.md §1.8; docs/design.md §D4).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from sessions_app.compaction.summary.content import TOOL_CALL_TYPES, Message
from sessions_app.compaction.summary.prompts import EXACT_IDENTIFIERS_HEADING

MAX_COMPACTION_SUMMARY_CHARS = 16_000
SUMMARY_TRUNCATED_MARKER = "\n\n[Compaction summary truncated to fit budget]"

# compaction-safeguard-quality.ts `extractOpaqueIdentifiers`. JS `\w`, `\d` and `\b` are ASCII,
# so they are spelled out: Python's Unicode `\b` would miss "编号123456".
_IDENTIFIER_RE = re.compile(
    r"[A-Fa-f0-9]{8,}"
    r"|https?://\S+"
    r"|/[A-Za-z0-9_.-]{2,}(?:/[A-Za-z0-9_.-]+)+"
    r"|[A-Za-z]:\\[A-Za-z0-9_\\.-]+"
    r"|[A-Za-z0-9._-]+\.[A-Za-z0-9._/-]+:[0-9]{1,5}"
    r"|(?<![A-Za-z0-9_])[0-9]{6,}(?![A-Za-z0-9_])"
)
_IDENTIFIER_LEAD_RE = re.compile(r"^[(\"'`\[{<]+")
_IDENTIFIER_TRAIL_RE = re.compile(r"[)\]\"'`,;:.!?<>]+$")
_PURE_HEX_RE = re.compile(r"^[A-Fa-f0-9]{8,}$")
# A section of a summary ends at the next heading, split-turn block, separator or XML-ish tag.
_SECTION_END_RE = re.compile(r"^(?:#{1,6}\s|\*\*Turn Context|---\s*$|<[a-z-]+>)", re.MULTILINE)
_EMPTY_SECTION_BODIES = frozenset({"", "none", "none.", "none captured", "none captured."})


def extract_identifiers(text: str) -> list[str]:
    """Return opaque identifiers (hashes, URLs, paths, host:port, long numbers), deduplicated."""
    found: list[str] = []
    seen: set[str] = set()
    for match in _IDENTIFIER_RE.finditer(text or ""):
        value = _IDENTIFIER_TRAIL_RE.sub("", _IDENTIFIER_LEAD_RE.sub("", match.group(0).strip()))
        key = _identifier_key(value)
        if len(value) >= 4 and key not in seen:
            seen.add(key)
            found.append(value)
    return found


def _identifier_key(value: str) -> str:
    """Return the comparison form: pure hex uppercased, anything else as is."""
    return value.upper() if _PURE_HEX_RE.match(value) else value


def _contains_identifier(text: str, identifier: str) -> bool:
    """Tell whether text holds the identifier (hex case-insensitively, else exactly)."""
    if _PURE_HEX_RE.match(identifier):
        return identifier.upper() in text.upper()
    return identifier in text


def message_source_texts(messages: Iterable[Message]) -> list[str]:
    """Return every text an identifier may hide in: text, tool-call arguments, tool results."""
    texts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") in TOOL_CALL_TYPES:
                texts.extend(_leaf_strings(block.get("arguments")))
    return texts


def _leaf_strings(value: object) -> list[str]:
    """Return the string and number leaves of a JSON value (tool-call arguments)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in _leaf_strings(item)]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _leaf_strings(item)]
    return []


def ensure_identifiers(summary: str, *, source_texts: Sequence[str], also_present_in: str = "") -> str:
    """Append identifiers missing from summary and memory under `## Exact identifiers`, capped."""
    head, section, rest = split_identifier_section(summary)
    identifiers = extract_identifiers("\n".join(source_texts))
    text, _ = place_identifiers(head, section, rest, identifiers, also_present_in)
    return text


def split_identifier_section(text: str) -> tuple[str, str, str]:
    """Split text into (before, the `## Exact identifiers` section, after)."""
    match = re.search(rf"^[ \t]*{re.escape(EXACT_IDENTIFIERS_HEADING)}[ \t]*$", text, re.MULTILINE)
    if not match:
        return text, "", ""
    body_start = match.end()
    end = _SECTION_END_RE.search(text, body_start + 1)
    section_end = end.start() if end else len(text)
    return text[: match.start()], text[match.start() : section_end], text[section_end:]


def place_identifiers(
    head: str, section: str, rest: str, identifiers: Sequence[str], also_present_in: str
) -> tuple[str, tuple[str, ...]]:
    """Add missing identifiers to the section until all survive the cap; return text and adds."""
    added: list[str] = []
    while True:
        text = _fit_protected(head, section, rest)
        missing = [
            ident
            for ident in identifiers
            if ident not in added
            and not _contains_identifier(text, ident)
            and not _contains_identifier(also_present_in, ident)
        ]
        if not missing:
            return text, tuple(added)
        section = _add_to_section(section, missing, head)
        added.extend(missing)


def _add_to_section(section: str, identifiers: Sequence[str], head: str) -> str:
    """Append `- id` bullets to the section, replacing a `None captured.` placeholder."""
    bullets = "\n".join(f"- {ident}" for ident in identifiers)
    if not section:
        lead = "\n\n" if head.strip() else ""
        return f"{lead}{EXACT_IDENTIFIERS_HEADING}\n{bullets}"
    stripped = section.rstrip()
    trailing = section[len(stripped) :]
    heading, _, body = stripped.partition("\n")
    if body.strip().lower() in _EMPTY_SECTION_BODIES:
        return f"{heading}\n{bullets}{trailing}"
    return f"{stripped}\n{bullets}{trailing}"


def _fit_protected(head: str, section: str, rest: str) -> str:
    """Cap to 16000 chars, cutting only the head; the section and rest are kept whole."""
    if len(head) + len(section) + len(rest) <= MAX_COMPACTION_SUMMARY_CHARS:
        return head + section + rest
    if section and not section[0].isspace():
        section = "\n\n" + section
    protected = section + rest
    if len(protected) >= MAX_COMPACTION_SUMMARY_CHARS:
        if len(section) >= MAX_COMPACTION_SUMMARY_CHARS:
            return section[:MAX_COMPACTION_SUMMARY_CHARS]
        # Like OpenClaw with an oversized suffix: keep its tail (diagnostics) over its head.
        return section + rest[len(protected) - MAX_COMPACTION_SUMMARY_CHARS :]
    return cap_text(head, MAX_COMPACTION_SUMMARY_CHARS - len(protected)) + protected


def cap_text(text: str, max_chars: int) -> str:
    """Cut text to max_chars ending with the truncation marker (`capCompactionSummary`)."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    budget = max_chars - len(SUMMARY_TRUNCATED_MARKER)
    if budget <= 0:
        # The marker cannot fit: keep the body prefix instead of a partial marker.
        return text[:max_chars]
    return text[:budget] + SUMMARY_TRUNCATED_MARKER
