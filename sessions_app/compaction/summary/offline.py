"""Deterministic offline summariser and flush extractor, used when no model is configured.

Pure module: no Django, no model. No OpenClaw source: the fallback is ours (docs/design.md,
Stack): without an LLM, compaction and flush still work, clearly labelled. The summary fills the
one heading set of docs/design.md §D4 by keyword extraction; it is crude but loses no identifier
and never invents content.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from sessions_app.compaction.summary.content import Message
from sessions_app.compaction.summary.identifiers import (
    ensure_identifiers,
    extract_identifiers,
    message_source_texts,
)
from sessions_app.compaction.summary.prompts import EXACT_IDENTIFIERS_HEADING, REQUIRED_SUMMARY_SECTIONS

OFFLINE_MARKER = "_(offline summary: no model configured)_"
MAX_ITEM_CHARS = 200
MAX_ITEMS_PER_SECTION = 20
DECISIONS, TODOS, RULES, ASKS = REQUIRED_SUMMARY_SECTIONS[:4]
_PLACEHOLDERS = frozenset({"none.", "none", "none captured.", "no prior history."})

_DECISION_RE = re.compile(r"\b(?:decided|decision|agreed|we will|we'll)\b|决定", re.IGNORECASE)
_RULE_RE = re.compile(r"\b(?:must|never|always|don't|don’t|do not|prefer)\b|必须|不要", re.IGNORECASE)
_TODO_RE = re.compile(r"\b(?:todo|need to|should)\b|待办", re.IGNORECASE)
_PREFERENCE_RE = re.compile(r"\b(?:prefer|preference|i like|i want|i'd like)\b|喜欢|偏好", re.IGNORECASE)
_REQUEST_RE = re.compile(
    r"^(?:please|pls|can you|could you|would you|will you|let's|help me|i need|i want)\b"
    r"|请|帮我|能否|麻烦",
    re.IGNORECASE,
)
_LEADING_TODO_RE = re.compile(r"^TODO\b[:\s-]*", re.IGNORECASE)
_BULLET_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")
# Keyword order decides the section: a decision that mentions "must" is still a decision.
_CLASSIFIERS = ((DECISIONS, _DECISION_RE), (RULES, _RULE_RE), (TODOS, _TODO_RE))


def offline_summary(
    *, messages: Sequence[Message], previous_summary: str | None, instructions: str = ""
) -> str:
    """Return an extractive five-heading summary, merged with the previous one."""
    sections, identifiers = _parse_previous(previous_summary or "", messages)
    for sentence in _conversation_sentences(messages):
        section = _classify(sentence)
        if section:
            sections[section].append(_short(sentence))
    sections[ASKS].extend(_pending_asks(messages))
    identifiers.extend(extract_identifiers("\n".join(message_source_texts(messages))))
    text = _render(sections, identifiers, instructions)
    # Keeps the 16000-char cap while protecting `## Exact identifiers` (the rule of identifiers.py).
    return ensure_identifiers(text, source_texts=[])


def offline_flush_lines(*, messages: Sequence[Message], existing_text: str) -> list[str]:
    """Return durable Markdown bullets (decisions, rules, TODOs, ids) not yet in existing_text."""
    known = _normalise(existing_text)
    lines: list[str] = []
    for sentence in _conversation_sentences(messages):
        label = _flush_label(sentence)
        if label and _normalise(sentence) not in known:
            _append_unique(lines, f"- {label}: {_short(_LEADING_TODO_RE.sub('', sentence))}")
    texts = [text for message in messages if _is_conversation(message) for text in _texts(message)]
    for identifier in extract_identifiers("\n".join(texts)):
        if not _identifier_known(identifier, existing_text):
            _append_unique(lines, f"- Identifier: {identifier}")
    return lines


def _flush_label(sentence: str) -> str | None:
    """Return the flush label of a durable sentence, or None."""
    section = _classify(sentence)
    if section == DECISIONS:
        return "Decision"
    if section == RULES:
        return "Preference" if _PREFERENCE_RE.search(sentence) else "Rule"
    if section == TODOS:
        return "TODO"
    return "Preference" if _PREFERENCE_RE.search(sentence) else None


def _classify(sentence: str) -> str | None:
    """Return the heading a sentence belongs under, or None."""
    return next((section for section, pattern in _CLASSIFIERS if pattern.search(sentence)), None)


def _conversation_sentences(messages: Iterable[Message]) -> list[str]:
    """Return the sentences of user and assistant text, in order."""
    return [
        sentence
        for message in messages
        if _is_conversation(message)
        for text in _texts(message)
        for sentence in _sentences(text)
    ]


def _is_conversation(message: Message) -> bool:
    """Tell whether a message is a user or assistant message."""
    return message.get("role") in ("user", "assistant")


def _texts(message: Message) -> list[str]:
    """Return the text parts of a message (thinking and tool calls excluded)."""
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    blocks = content if isinstance(content, list) else []
    return [
        block["text"]
        for block in blocks
        if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str)
    ]


def _sentences(text: str) -> list[str]:
    """Split text into trimmed sentences, bullets and numbering removed."""
    sentences = []
    for line in text.splitlines():
        for part in _SENTENCE_SPLIT_RE.split(_BULLET_RE.sub("", line)):
            part = " ".join(part.split())
            if len(part) >= 3:
                sentences.append(part)
    return sentences


def _short(text: str) -> str:
    """Collapse whitespace and cut to 200 chars with `...`."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 3] + "..."


def _pending_asks(messages: Sequence[Message]) -> list[str]:
    """Return the trailing user questions or requests no assistant text has answered yet."""
    asks: list[str] = []
    for message in reversed(messages):
        if message.get("role") == "assistant" and any(t.strip() for t in _texts(message)):
            break
        if message.get("role") == "user":
            text = " ".join(" ".join(_texts(message)).split())
            if text and ("?" in text or "？" in text or _REQUEST_RE.search(text)):
                asks.append(_short(text))
    return list(reversed(asks))


def _has_answer(messages: Sequence[Message]) -> bool:
    """Tell whether any assistant message has text (so earlier pending asks were addressed)."""
    return any(
        message.get("role") == "assistant" and any(t.strip() for t in _texts(message)) for message in messages
    )


def _parse_previous(summary: str, messages: Sequence[Message]) -> tuple[dict[str, list[str]], list[str]]:
    """Split a previous summary into its section items and identifiers."""
    sections: dict[str, list[str]] = {heading: [] for heading in REQUIRED_SUMMARY_SECTIONS[:4]}
    identifiers = extract_identifiers(summary)
    current: str | None = None
    for line in summary.splitlines():
        stripped = line.strip()
        if stripped.startswith(("#", "**Turn Context")):
            current = stripped if stripped in REQUIRED_SUMMARY_SECTIONS else None
            continue
        item = _BULLET_RE.sub("", stripped)
        if _is_noise(item) or current == EXACT_IDENTIFIERS_HEADING:
            continue
        # Lines outside the known headings (preserved turns, split-turn notes) are re-classified.
        section = current or _classify(item)
        if section:
            sections[section].append(_short(item))
    if _has_answer(messages):
        sections[ASKS] = []
    return sections, identifiers


def _is_noise(item: str) -> bool:
    """Tell whether a summary line carries nothing: blank, placeholder, marker or note."""
    if not item or item.lower() in _PLACEHOLDERS or item == OFFLINE_MARKER:
        return True
    return item.startswith("_(") or (item.startswith("[") and item.endswith("]"))


def _render(sections: dict[str, list[str]], identifiers: list[str], instructions: str) -> str:
    """Render the marker line and the five headings; empty sections say `None.`."""
    lines = [OFFLINE_MARKER]
    if instructions.strip():
        lines.append(f"_(focus requested: {_short(instructions)})_")
    for heading, items in sections.items():
        kept = _dedupe(items)[-MAX_ITEMS_PER_SECTION:]
        lines.extend(["", heading, *(f"- {item}" for item in kept)])
        if not kept:
            lines.append("None.")
    unique = extract_identifiers("\n".join(identifiers))
    lines.extend(["", EXACT_IDENTIFIERS_HEADING, *(f"- {ident}" for ident in unique)])
    if not unique:
        lines.append("None captured.")
    return "\n".join(lines)


def _dedupe(items: Iterable[str]) -> list[str]:
    """Drop repeated items (case and whitespace insensitive), keeping the latest occurrence."""
    latest: dict[str, str] = {}
    for item in items:
        key = _normalise(item)
        latest.pop(key, None)
        latest[key] = item
    return list(latest.values())


def _identifier_known(identifier: str, text: str) -> bool:
    """Tell whether text already holds the identifier (hex case-insensitively)."""
    if re.fullmatch(r"[A-Fa-f0-9]{8,}", identifier):
        return identifier.upper() in text.upper()
    return identifier in text


def _normalise(text: str) -> str:
    """Collapse whitespace and casefold, for duplicate checks."""
    return " ".join(text.split()).casefold()


def _append_unique(lines: list[str], line: str) -> None:
    """Append line unless it is already there."""
    if line not in lines:
        lines.append(line)
