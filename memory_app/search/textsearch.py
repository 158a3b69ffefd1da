"""How text is prepared for Postgres full-text search (docs/design.md §D6).

Pure module: no Django, no database; `search.py` and `indexing.py` feed its output to Postgres.

* Configuration `openclaw_search` (migration memory_app 0007): `simple` (lowercasing, no stop
  list) with plain ASCII words stemmed by Snowball English, so "decided" finds "decide" and
  "picked" finds "pick"; identifiers, paths, hosts, numbers and hashes are token types the
  stemmer never sees, so they are indexed as written.
* The index side stores `to_tsvector(TS_CONFIG, index_text(text))`; the query side sends
  `to_tsquery(TS_CONFIG, to_tsquery_text(query_terms(query)))`, an OR of quoted terms ranked with
  `ts_rank_cd`, not OpenClaw's all-terms AND (OpenClaw bug reports, docs/openclaw-behaviour.md §5).
* Postgres' default parser keeps a run of CJK characters as one word, the same problem OpenClaw
  has with unicode61 (OpenClaw bug reports, docs/openclaw-behaviour.md §5). Both sides therefore add the character bigrams of
  every CJK run (the character itself for a one-character run).
* The parser also reads `src/app/main.py` as one `file` token and `main.py` as a `host`, so a
  search for `main` or `main.py` would miss. Both sides add the parts of such identifiers.

The contract between the two sides: for every term `t` in `query_terms(x)`, the lexemes that
`to_tsquery(TS_CONFIG, quote(t))` produces also occur in `to_tsvector(TS_CONFIG, index_text(x))`.
Both sides run the same helpers on the same text, and Postgres runs the same parser on both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from memory_app.search.ranking import is_stop_word
from memory_app.tokens import estimate_string_chars

TS_CONFIG = "openclaw_search"
DEFAULT_MAX_TERMS = 24

# Scripts written without spaces: CJK ideographs (+Ext A, compatibility, Ext B+), kana, Hangul.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_CJK_RUN_RE = re.compile(f"[{_CJK}]+")
_CJK_OR_OTHER_RE = re.compile(f"[{_CJK}]+|[^{_CJK}]+")
_WORD_RE = re.compile(r"\w+")
# Letters and digits without the underscore: Postgres' parser splits `foo_bar` into two words.
_PLAIN_WORD_RE = re.compile(r"[^\W_]+")
# Word characters joined by path, URL, dotted-name or snake/kebab separators.
_IDENTIFIER_RE = re.compile(r"\w[/\\.:@#=_\-]+\w")
_SEGMENT_SPLIT_RE = re.compile(r"[/\\@:?#=&]+")
# An abbreviated or full hex hash (git, sha256): hex digits with at least one digit and letter.
_HEX_HASH_RE = re.compile(r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}")
_NON_WORD_RE = re.compile(r"\W")
_MARKUP_RE = re.compile(r"[&<]")
# Where the meaningful part of a whitespace-delimited chunk starts and ends.
_CORE_START_RE = re.compile(r"[\w/\\]|-(?=\d)")
_CORE_END_RE = re.compile(r"[\w/\\](?=\W*$)")


def index_text(text: str) -> str:
    """Return the text to feed `to_tsvector(TS_CONFIG, ...)`: `text` plus CJK and id variants."""
    text = text.replace("\x00", "")  # Postgres text cannot hold NUL
    extras = _unique([*_cjk_variants(text), *_identifier_variants(text)])
    if not extras:
        return text
    return f"{text}\n{' '.join(extras)}"


def query_terms(query: str, *, max_terms: int = DEFAULT_MAX_TERMS) -> list[str]:
    """Return the lowercased terms to OR together for `query`, rarest-looking first."""
    query = query.replace("\x00", "")
    identifiers = _unique(_identifiers(query))
    words = _unique([*_identifier_parts_of(identifiers), *_query_words(query)])
    words = [word for word in words if word not in identifiers]
    # Stop words and single ascii characters match nearly every chunk: drop them unless the
    # query has nothing else.
    meaningful = [word for word in words if not _is_noise(word)]
    ranked = identifiers + sorted(meaningful or words, key=estimate_string_chars, reverse=True)
    return ranked[: max(0, max_terms)]


def cjk_term_share(terms: Sequence[str]) -> float:
    """Return the share of the query terms that are CJK (character bigrams or single characters)."""
    if not terms:
        return 0.0
    return sum(1 for term in terms if _CJK_RUN_RE.fullmatch(term)) / len(terms)


def to_tsquery_text(terms: Iterable[str]) -> str:
    """Return a `to_tsquery(TS_CONFIG, ...)` string that ORs the terms as quoted lexemes."""
    # Inside single quotes tsquery syntax only knows `\` and `'`: escaping both keeps every
    # operator (& | ! ( ) : * <->) literal. An empty result means "no keyword search".
    operands = []
    for term in terms:
        cleaned = term.replace("\x00", "")
        if not cleaned.strip():
            continue
        quoted = "'" + cleaned.replace("\\", "\\\\").replace("'", "''") + "'"
        # A short commit hash in the query should find the full hash in the text.
        operands.append(quoted + ":*" if _HEX_HASH_RE.fullmatch(cleaned.lower()) else quoted)
    return " | ".join(operands)


def _cjk_variants(text: str) -> list[str]:
    """Return CJK bigrams, and the ascii parts of words that mix CJK with other letters."""
    variants: list[str] = []
    for word in _WORD_RE.findall(text):
        if not _CJK_RUN_RE.search(word):
            continue
        for run in _CJK_OR_OTHER_RE.findall(word):
            variants.extend(_bigrams(run) if _CJK_RUN_RE.fullmatch(run) else [run.lower()])
    return variants


def _bigrams(run: str) -> list[str]:
    """Return the character bigrams of a CJK run, or the run itself when it is one char."""
    if len(run) == 1:
        return [run]
    return [run[index : index + 2] for index in range(len(run) - 1)]


def _identifier_variants(text: str) -> list[str]:
    """Return the parts of every word in `text` that the parser may keep whole or drop."""
    # Broader than _identifiers: `-42` is the lexeme '-42' and `2026-02-16` gives '-02', so the
    # index also lists their plain words, which the query side sends on their own.
    parts: list[str] = []
    for chunk in text.split():
        core = _core(chunk)
        if _NON_WORD_RE.search(core):
            parts.extend(_identifier_parts_of([core]))
        elif core and _MARKUP_RE.search(chunk):
            # `&amp;` is an entity and `<div` opens a tag: `simple` indexes neither token type.
            parts.extend(_PLAIN_WORD_RE.findall(core))
    return parts


def _identifiers(text: str) -> list[str]:
    """Return the lowercased paths, URLs, dotted or snake_case names and hex hashes in `text`."""
    cores = (_core(chunk) for chunk in text.split())
    return [core for core in cores if _IDENTIFIER_RE.search(core) or _HEX_HASH_RE.fullmatch(core)]


def _core(chunk: str) -> str:
    """Return a whitespace-delimited chunk lowercased, without its wrapping punctuation."""
    # Postgres parses `./run.sh` as './run.sh' at the start of a string but as '/run.sh' after
    # a space, and a query term always starts a string: so cut what precedes the first word
    # character or slash (a minus sign stays: '-42' is one lexeme), and trailing punctuation.
    start = _CORE_START_RE.search(chunk)
    end = _CORE_END_RE.search(chunk)
    if start is None or end is None or start.start() >= end.end():
        return ""
    return chunk[start.start() : end.end()].lower()


def _identifier_parts_of(identifiers: Iterable[str]) -> list[str]:
    """Return path/URL segments and plain words of identifiers, leaving CJK to the bigrams."""
    parts: list[str] = []
    for identifier in identifiers:
        segments = [seg for seg in _SEGMENT_SPLIT_RE.split(identifier) if _WORD_RE.search(seg)]
        candidates = [*segments, *_PLAIN_WORD_RE.findall(identifier)]
        parts.extend(part for part in candidates if part != identifier and not _CJK_RUN_RE.search(part))
    return parts


def _query_words(query: str) -> list[str]:
    """Return the plain words of `query`, its CJK runs as bigrams."""
    words: list[str] = []
    for word in _WORD_RE.findall(query.lower()):
        for run in _CJK_OR_OTHER_RE.findall(word):
            if _CJK_RUN_RE.fullmatch(run):
                words.extend(_bigrams(run))
            else:
                words.extend(_PLAIN_WORD_RE.findall(run))
    return words


def _is_noise(word: str) -> bool:
    """Tell whether a term would match almost everything: a stop word or one ascii char."""
    return is_stop_word(word) or (len(word) == 1 and word.isascii())


def _unique(items: Iterable[str]) -> list[str]:
    """Return the non-empty items in first-seen order without repeats."""
    return [item for item in dict.fromkeys(items) if item]
