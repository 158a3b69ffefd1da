"""The query's words marked in a search snippet, as the dashboard shows results (docs/dashboard.md, Search).

Pure module: no Django. Full-text search (memory_app/search/textsearch.py) decides what matches; this only
shows a reader where, so it marks whole words and leaves out words that match everything:
* A word of the query marks the same word in the text, never a part of another word ("on" does not
  mark "Decisions"), with the English endings the search's stemmer folds ("decide" marks "decided").
* Stop words (OpenClaw's lists, `memory_app.search.ranking.STOP_WORDS`) and single letters mark nothing,
  unless the query has nothing else.
* Chinese and Japanese have no spaces: a run of ideographs or kana is split at its stop words and at
  the particles below, and what is left marks its character pairs (the search's bigrams) wherever
  they occur; neighbouring marks merge, so "医疗保险" is one mark.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape

from memory_app.search.ranking import STOP_WORDS

# Ideographs (with Ext A and compatibility forms) and kana: scripts written without spaces.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN_RE = re.compile(f"[{_CJK}]+")
# A letter or digit of a spaced script: what may not touch a marked word on either side.
_LETTER = rf"[^\W_{_CJK}]"
_WORD_RE = re.compile(rf"{_LETTER}+(?:[-./#@:]{_LETTER}+)*")
# One-character function words that cut a run of Chinese; the stop list's other single characters
# (用, 在, 有, 说 …) also begin or end content words (用户, 现在), so they stay.
_PARTICLES = frozenset("的了着吗呢吧啊呀嘛啦是和与或也都就被把之")
_CJK_STOPS = sorted(
    (word for word in STOP_WORDS if len(word) > 1 and _CJK_RUN_RE.fullmatch(word)), key=len, reverse=True
)
_ENDINGS = ("ing", "ed", "es", "s")
_MIN_STEM = 3


def highlight_html(text: str, query: str) -> str:
    """Return ``text`` HTML-escaped with the query's words wrapped in <mark>."""
    pattern = _pattern(highlight_terms(query))
    if pattern is None:
        return escape(text, quote=False)
    spans = _merged(match.span(1) for match in pattern.finditer(text))
    pieces, last = [], 0
    for start, end in spans:
        pieces.append(escape(text[last:start], quote=False))
        pieces.append(f"<mark>{escape(text[start:end], quote=False)}</mark>")
        last = end
    pieces.append(escape(text[last:], quote=False))
    return "".join(pieces)


def highlight_terms(query: str) -> list[str]:
    """Return what of ``query`` is worth marking: words without stop words, CJK character pairs."""
    words = list(dict.fromkeys(word.lower() for word in _WORD_RE.findall(query or "")))
    meaningful = [word for word in words if not _is_noise(word)]
    cjk = [pair for run in _CJK_RUN_RE.findall(query or "") for pair in _cjk_terms(run)]
    return list(dict.fromkeys([*(meaningful or words), *cjk]))


def _is_noise(word: str) -> bool:
    return word in STOP_WORDS or (len(word) == 1 and word.isascii())


def _cjk_terms(run: str) -> list[str]:
    """Return the character pairs of a CJK run once its stop words and particles are cut out."""
    terms: list[str] = []
    for segment in _cjk_segments(run):
        if len(segment) == 1:
            terms.append(segment)
        terms.extend(segment[index : index + 2] for index in range(len(segment) - 1))
    return terms


def _cjk_segments(run: str) -> list[str]:
    segments, current, index = [], "", 0
    while index < len(run):
        stop = next((word for word in _CJK_STOPS if run.startswith(word, index)), None)
        if stop is None and run[index] not in _PARTICLES:
            current += run[index]
            index += 1
            continue
        segments.append(current)
        current = ""
        index += len(stop) if stop else 1
    segments.append(current)
    return [segment for segment in segments if segment]


def _pattern(terms: list[str]) -> re.Pattern[str] | None:
    """Return one case-insensitive pattern of every term: words whole, CJK pairs anywhere.

    A lookahead, so matches may overlap: the pairs of "数据库" are "数据" and "据库".
    """
    if not terms:
        return None
    alternatives = [_term_pattern(term) for term in sorted(terms, key=len, reverse=True)]
    return re.compile(f"(?=({'|'.join(alternatives)}))", re.IGNORECASE)


def _term_pattern(term: str) -> str:
    if _CJK_RUN_RE.fullmatch(term):
        return re.escape(term)
    return rf"(?<!{_LETTER}){_inflected(term)}(?!{_LETTER})"


def _inflected(word: str) -> str:
    """Return a pattern of an English word with the endings the stemmer folds, else the word."""
    if not (word.isascii() and word.isalpha()):
        return re.escape(word)
    stem = _stem(word)
    endings = ("e", *_ENDINGS) if stem != word else ("d", *_ENDINGS)
    return f"{re.escape(stem)}(?:{'|'.join(endings)})?"


def _stem(word: str) -> str:
    """Drop one English ending: "decisions" → "decision", "picked" → "pick", "uses" → "use"."""
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= _MIN_STEM:
            return word[: -len(ending)]
    return word


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Return the spans with touching or overlapping ones joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
