"""Line-based Markdown chunking: OpenClaw's `chunkMarkdown` (docs/openclaw-behaviour.md §4.3).

Pure module: no Django, no database. Sizes are OpenClaw's CJK-weighted char counts
(`memory_app.tokens.estimate_string_chars`), and long lines are cut in UTF-16 code units like the
JavaScript original, so chunk boundaries (and therefore chunk hashes and ids) match OpenClaw's.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memory_app.search.calibration import DEFAULT_PIECES_PER_TOKEN
from memory_app.tokens import CHARS_PER_TOKEN, estimate_string_chars
from memory_app.utf16 import utf16_slices

# docs/openclaw-behaviour.md §4.1: `memorySearch.chunking.tokens` / `overlap` defaults.
DEFAULT_CHUNK_TOKENS = 400
DEFAULT_CHUNK_OVERLAP = 80
# internal.ts `chunkMarkdown`: `Math.max(32, tokens * CHARS_PER_TOKEN_ESTIMATE)`.
MIN_CHUNK_CHARS = 32

# docs/design.md §D9. BERT-style embedders add [CLS] and [SEP] to every input.
SPECIAL_TOKENS_PER_INPUT = 2


@dataclass(frozen=True)
class Chunk:
    """A run of lines of one file (1-based, inclusive) with the sha256 hex of its text."""

    start_line: int
    end_line: int
    text: str
    hash: str


@dataclass(frozen=True)
class _Segment:
    text: str
    line_no: int
    size: int  # estimate_string_chars(text) + 1 for the joining newline


def hash_text(text: str) -> str:
    """Return the sha256 hex digest of `text` (OpenClaw `hashText`)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_markdown(
    content: str, *, tokens: int = DEFAULT_CHUNK_TOKENS, overlap: int = DEFAULT_CHUNK_OVERLAP
) -> list[Chunk]:
    """Split `content` into line-based chunks of about `tokens` tokens, `overlap` tokens shared."""
    # The resolver clamps tokens >= 1 and overlap to [0, tokens-1] (docs/openclaw-behaviour.md §4.1); without
    # the
    # clamp an overlap >= tokens would carry every line forward and chunks would grow unbounded.
    tokens = max(1, tokens)
    overlap = min(max(0, overlap), tokens - 1)
    max_chars = max(MIN_CHUNK_CHARS, tokens * CHARS_PER_TOKEN)
    overlap_chars = max(0, overlap * CHARS_PER_TOKEN)
    chunks: list[Chunk] = []
    current: list[_Segment] = []
    current_chars = 0
    for line_no, line in enumerate(content.split("\n"), start=1):
        for piece in _line_segments(line, max_chars=max_chars, tokens=tokens):
            segment = _Segment(piece, line_no, estimate_string_chars(piece) + 1)
            if current and current_chars + segment.size > max_chars:
                chunks.append(_make_chunk(current))
                current = _carry_overlap(current, overlap_chars)
                current_chars = sum(entry.size for entry in current)
            current.append(segment)
            current_chars += segment.size
    if current:
        chunks.append(_make_chunk(current))
    # manager-embedding-policy.ts `filterNonEmptyMemoryChunks`.
    return [chunk for chunk in chunks if not _is_blank(chunk.text)]


def _line_segments(line: str, *, max_chars: int, tokens: int) -> list[str]:
    """Cut one line into pieces of at most `max_chars` UTF-16 units, CJK-heavy ones finer."""
    if not line:
        return [""]
    segments: list[str] = []
    for coarse in utf16_slices(line, max_chars):
        # A slice whose weighted size still exceeds the budget (CJK: 1 char ~ 1 token) is
        # re-cut every `tokens` units so the chunk stays within its token budget (internal.ts).
        if estimate_string_chars(coarse) > max_chars:
            segments.extend(utf16_slices(coarse, max(1, tokens)))
        else:
            segments.append(coarse)
    return segments


def _make_chunk(entries: Sequence[_Segment]) -> Chunk:
    """Join the collected segments into a chunk (internal.ts `flush`)."""
    text = "\n".join(entry.text for entry in entries)
    return Chunk(entries[0].line_no, entries[-1].line_no, text, hash_text(text))


def _carry_overlap(entries: Sequence[_Segment], overlap_chars: int) -> list[_Segment]:
    """Keep trailing segments until their size reaches `overlap_chars` (internal.ts)."""
    if overlap_chars <= 0:
        return []
    kept: list[_Segment] = []
    acc = 0
    for entry in reversed(entries):
        acc += entry.size
        kept.insert(0, entry)
        if acc >= overlap_chars:
            break
    return kept


def _is_blank(text: str) -> bool:
    """Tell whether `text` is empty after JavaScript's `trim()` (which also strips U+FEFF)."""
    return not text.replace("\ufeff", " ").strip()


def effective_chunk_tokens(
    configured: int, embedder_max_tokens: int | None, *, pieces_per_token: float = DEFAULT_PIECES_PER_TOKEN
) -> int:
    """Return the chunk size in estimated tokens that the embedder reads without truncating.

    ``pieces_per_token``: the embedder's word pieces per estimated token (its
    `calibration.EmbedderProfile`). A chunk made mostly of hashes can still run past the limit,
    so the embedder must still cut (or window) what it cannot read (OpenClaw's
    `enforceEmbeddingMaxInputTokens`, docs/openclaw-behaviour.md §4.3).
    """
    # docs/design.md §D9: min(memorySearch.chunking.tokens, the embedder's input limit).
    configured = max(1, configured)
    if embedder_max_tokens is None or embedder_max_tokens <= 0:
        return configured
    readable = embedder_max_tokens - SPECIAL_TOKENS_PER_INPUT
    fits = math.floor(readable / pieces_per_token)
    return max(1, min(configured, fits))


def remap_lines(chunks: Sequence[Chunk], line_map: Sequence[int]) -> list[Chunk]:
    """Map content line numbers to source lines (message seq or JSONL line) via `line_map`."""
    # internal.ts `remapChunkLines`: line_map[i] is the source line of 0-based content line i;
    # a line outside the map keeps its number. The hash stays: it is the hash of the text.
    if not line_map:
        return list(chunks)
    return [
        replace(
            chunk,
            start_line=_map_line(chunk.start_line, line_map),
            end_line=_map_line(chunk.end_line, line_map),
        )
        for chunk in chunks
    ]


def _map_line(line: int, line_map: Sequence[int]) -> int:
    """Return `line_map[line - 1]`, or `line` itself when the map does not reach it."""
    return line_map[line - 1] if 1 <= line <= len(line_map) else line


def chunk_lines(
    content: str, *, tokens: int, overlap: int, max_line_tokens: int | None = None
) -> list[Chunk]:
    """Split `content` into chunks of whole lines (a transcript: one line per message).

    `chunk_markdown` cuts any line longer than the chunk size, so with small chunks a message is
    spread over two chunks and no result shows it whole. Here a line is cut only when it is longer
    than `max_line_tokens` (the embedder's limit; default `tokens`), and a line longer than
    `tokens` forms a chunk of its own. Lines are grouped while they fit in `tokens`; `overlap`
    repeats trailing lines of a chunk (whole lines) at the start of the next one as far as they
    fit beside the next line, so a chunk never holds only repeated lines.
    """
    tokens = max(1, tokens)
    overlap = min(max(0, overlap), tokens - 1)
    max_chars = max(MIN_CHUNK_CHARS, tokens * CHARS_PER_TOKEN)
    line_tokens = max(tokens, max_line_tokens or tokens)
    line_chars = max(MIN_CHUNK_CHARS, line_tokens * CHARS_PER_TOKEN)
    chunks: list[Chunk] = []
    current: list[_Segment] = []
    carried = 0  # leading segments of `current` repeated from the previous chunk
    for line_no, line in enumerate(content.split("\n"), start=1):
        for piece in _line_segments(line, max_chars=line_chars, tokens=line_tokens):
            segment = _Segment(piece, line_no, estimate_string_chars(piece) + 1)
            if len(current) > carried and _size(current) + segment.size > max_chars:
                chunks.append(_make_chunk(current))
                current = _carry_overlap(current, overlap * CHARS_PER_TOKEN)
                carried = len(current)
            while current and _size(current) + segment.size > max_chars:
                current, carried = current[1:], carried - 1
            current.append(segment)
    if len(current) > carried:
        chunks.append(_make_chunk(current))
    return [chunk for chunk in chunks if not _is_blank(chunk.text)]


def _size(segments: Sequence[_Segment]) -> int:
    return sum(segment.size for segment in segments)
