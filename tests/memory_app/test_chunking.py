"""Line-based chunking (docs/openclaw-behaviour.md §4.3) without a database."""

from __future__ import annotations

import hashlib

from memory_app.index.chunking import Chunk, chunk_markdown, effective_chunk_tokens, remap_lines

EIGHT_LINES = [f"line {number} " + "x" * 21 for number in range(1, 9)]  # 28 chars each
ASTRAL_CJK = "\U00020000"  # CJK Extension B: two UTF-16 units, weight 4


def _spans(chunks: list[Chunk]) -> list[tuple[int, int]]:
    return [(chunk.start_line, chunk.end_line) for chunk in chunks]


def _lengths(chunks: list[Chunk]) -> list[int]:
    return [len(chunk.text) for chunk in chunks]


def test_long_latin_line_is_sliced_every_max_chars() -> None:
    chunks = chunk_markdown("a" * 4825, tokens=400, overlap=0)

    assert _lengths(chunks) == [1600, 1600, 1600, 25]
    assert _spans(chunks) == [(1, 1)] * 4


def test_default_sizes_are_400_tokens_with_80_overlap() -> None:
    assert _lengths(chunk_markdown("a" * 4825)) == _lengths(
        chunk_markdown("a" * 4825, tokens=400, overlap=80)
    )


def test_overlap_carries_the_last_line_into_the_next_chunk() -> None:
    # maxChars = max(32, 20*4) = 80, each line weighs 28+1 = 29, so two lines fit; the overlap
    # of 5*4 = 20 chars is reached by the last line alone.
    assert all(len(line) == 28 for line in EIGHT_LINES)

    chunks = chunk_markdown("\n".join(EIGHT_LINES), tokens=20, overlap=5)

    assert _spans(chunks) == [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8)]
    assert chunks[0].text == f"{EIGHT_LINES[0]}\n{EIGHT_LINES[1]}"
    assert chunks[1].text == f"{EIGHT_LINES[1]}\n{EIGHT_LINES[2]}"


def test_no_overlap_gives_disjoint_chunks() -> None:
    chunks = chunk_markdown("\n".join(EIGHT_LINES), tokens=20, overlap=0)

    assert _spans(chunks) == [(1, 2), (3, 4), (5, 6), (7, 8)]


def test_overlap_is_clamped_below_the_chunk_size() -> None:
    content = "\n".join(EIGHT_LINES)

    assert chunk_markdown(content, tokens=20, overlap=50) == chunk_markdown(content, tokens=20, overlap=19)


def test_chunk_hash_is_sha256_hex_of_its_text() -> None:
    chunk = chunk_markdown("# Title\nbody")[0]

    assert chunk == Chunk(1, 2, "# Title\nbody", hashlib.sha256(b"# Title\nbody").hexdigest())


def test_cjk_lines_weigh_four_per_char() -> None:
    # 100 CJK chars weigh 400 + 1; three lines are 1203, a fourth would pass 1600.
    content = "\n".join(["向" * 100] * 10)

    chunks = chunk_markdown(content, tokens=400, overlap=0)

    assert _spans(chunks) == [(1, 3), (4, 6), (7, 9), (10, 10)]
    assert _lengths(chunks) == [302, 302, 302, 100]


def test_long_cjk_line_is_resliced_every_tokens_units() -> None:
    # 500 chars fit one 1600-unit slice but weigh 2000, so it is re-cut every 400 units.
    assert _lengths(chunk_markdown("向" * 500, tokens=400, overlap=0)) == [400, 100]
    # With overlap the whole 400-char segment is carried over, as in OpenClaw.
    assert _lengths(chunk_markdown("向" * 500, tokens=400, overlap=80)) == [400, 501]


def test_mixed_cjk_and_latin_weights() -> None:
    line = "ab向量" * 10  # 40 chars weighing 2*1 + 2*4 = 10 per repeat = 100

    chunks = chunk_markdown("\n".join([line] * 40), tokens=100, overlap=0)

    # maxChars 400: three lines weigh 303, a fourth makes 404.
    assert _spans(chunks)[:2] == [(1, 3), (4, 6)]
    assert len(chunks) == 14


def test_empty_and_blank_content_gives_no_chunks() -> None:
    assert chunk_markdown("") == []
    assert chunk_markdown("\n\n\n") == []
    assert chunk_markdown("   \n\t\n\ufeff") == []


def test_empty_lines_count_for_line_numbers() -> None:
    chunks = chunk_markdown("\n\nhello\n\n\nworld\n")

    assert _spans(chunks) == [(1, 7)]
    assert chunks[0].text == "\n\nhello\n\n\nworld\n"


def test_empty_lines_each_weigh_one_char() -> None:
    # 40 empty lines weigh 40, then "a"*40 weighs 41: over maxChars 80 at tokens=20.
    chunks = chunk_markdown("\n" * 40 + "a" * 40, tokens=20, overlap=0)

    assert _spans(chunks) == [(41, 41)]  # the blank chunk of lines 1-40 is dropped


def test_surrogate_pairs_are_never_split() -> None:
    # tokens=8: maxChars 32 units. "a" + 16 pairs is 33 units: the cut moves past the pair.
    line = "a" + ASTRAL_CJK * 20

    chunks = chunk_markdown(line, tokens=8, overlap=0)

    assert _lengths(chunks) == [5, 4, 4, 4, 4]
    assert "".join(chunk.text for chunk in chunks) == line
    for chunk in chunks:
        chunk.text.encode("utf-8")  # a lone surrogate would raise here


def test_astral_emoji_lines_are_cut_on_code_point_boundaries() -> None:
    line = "x" + "\U0001f600" * 40

    chunks = chunk_markdown(line, tokens=8, overlap=0)

    # Segments of one line that share a chunk are joined by "\n".
    assert "".join(chunk.text.replace("\n", "") for chunk in chunks) == line
    assert all(chunk.text.encode("utf-8") for chunk in chunks)


def test_effective_chunk_tokens_fits_minilm() -> None:
    # (256 word pieces - [CLS] - [SEP]) / 2.0 word pieces per estimated token.
    assert effective_chunk_tokens(400, 256) == 127
    assert effective_chunk_tokens(100, 256) == 100
    assert effective_chunk_tokens(400, 8192) == 400
    assert effective_chunk_tokens(400, None) == 400
    assert effective_chunk_tokens(0, None) == 1


def test_remap_lines_maps_content_lines_to_source_lines() -> None:
    chunks = [Chunk(1, 2, "User: a\nAssistant: b", "h1"), Chunk(3, 4, "User: c\n", "h2")]

    remapped = remap_lines(chunks, [3, 5, 9])

    assert remapped == [Chunk(3, 5, "User: a\nAssistant: b", "h1"), Chunk(9, 4, "User: c\n", "h2")]
    assert chunks[0].start_line == 1  # input untouched
    assert remap_lines(chunks, []) == chunks


def test_effective_chunk_tokens_follows_the_embedders_pieces_per_token() -> None:
    # e5's SentencePiece: 1.25 pieces per estimated token, so OpenClaw's 400 fit its 512 pieces.
    assert effective_chunk_tokens(400, 512, pieces_per_token=1.25) == 400
    assert effective_chunk_tokens(400, 512) == 255  # the default 2.0 for an unmeasured embedder
