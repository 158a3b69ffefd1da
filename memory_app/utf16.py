"""Measuring and cutting text in UTF-16 code units, as JavaScript's `String.length` counts.

OpenClaw measures snippets, trims and chunk sizes in UTF-16 units; Python strings index code
points. These helpers reproduce the JavaScript figures without ever splitting a surrogate pair
(which Python cannot represent in valid text). Pure: used by chunking, ranking and pruning.
"""

from __future__ import annotations


def units(char: str) -> int:
    """Return how many UTF-16 code units one character takes (2 above the BMP)."""
    return 2 if ord(char) > 0xFFFF else 1


def utf16_len(text: str) -> int:
    """Return the JavaScript length of ``text``."""
    # Encoding runs in C: search cuts a snippet from every candidate of every query.
    # "surrogatepass" counts a lone surrogate (possible in JSON input) as the one unit it is.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_head(text: str, limit: int) -> str:
    """Return the longest prefix of at most ``limit`` units."""
    if limit <= 0:
        return ""
    length = utf16_len(text)
    if length <= limit:
        return text
    if length == len(text):  # nothing above the BMP: units are characters
        return text[:limit]
    used = 0
    for index, char in enumerate(text):
        used += units(char)
        if used > limit:
            return text[:index]
    return text


def utf16_tail(text: str, limit: int) -> str:
    """Return the longest suffix of at most ``limit`` units."""
    if limit <= 0:
        return ""
    used = 0
    for index in range(len(text) - 1, -1, -1):
        used += units(text[index])
        if used > limit:
            return text[index + 1 :]
    return text


def utf16_slices(text: str, step: int) -> list[str]:
    """Cut ``text`` every ``step`` units, moving a cut inside a surrogate pair one unit on."""
    pieces: list[str] = []
    start = used = 0
    for index, char in enumerate(text):
        used += units(char)
        if used >= step:
            pieces.append(text[start : index + 1])
            start, used = index + 1, 0
    if start < len(text):
        pieces.append(text[start:])
    return pieces
