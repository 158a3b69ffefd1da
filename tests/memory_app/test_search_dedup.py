"""Search results show each line once, and transcripts are chunked by whole messages (real Postgres)."""

from __future__ import annotations

import itertools

import pytest

from memory_app.documents import Provenance, write_document
from memory_app.index.rows import index_document
from memory_app.models import MemoryChunk
from memory_app.search.hybrid import hybrid_search
from sessions_app.indexing import index_session_transcript
from tests import factories

pytestmark = pytest.mark.django_db


def test_overlapping_chunks_do_not_show_the_same_lines_twice(world, fake_embeddings) -> None:
    world.assistant.settings = {"memorySearch": {"chunking": {"tokens": 12, "overlap": 6}}}
    world.assistant.save()
    lines = [f"Line {i}: the heron migration runbook step {i}." for i in range(1, 7)]
    document, _ = write_document(
        assistant=world.assistant,
        path="memory/runbook.md",
        content="\n".join(lines),
        provenance=Provenance(author="user"),
    )
    index_document(document.pk)
    chunks = MemoryChunk.objects.filter(assistant=world.assistant).order_by("start_line")
    assert any(a.end_line >= b.start_line for a, b in itertools.pairwise(chunks))  # the chunks overlap

    response = hybrid_search(
        assistant=world.assistant, query="heron migration runbook", min_score=0, max_results=10
    )
    shown = [line for r in response.results for line in r.snippet.split("\n")]
    assert sorted(shown) == sorted(set(shown))  # every line at most once
    assert set(shown) == set(lines)  # and every line still shown by some result
    for result in response.results:  # each citation names exactly the lines shown
        assert result.snippet.split("\n") == lines[result.start_line - 1 : result.end_line]


def test_a_transcript_chunk_holds_whole_messages(world, fake_embeddings) -> None:
    world.assistant.settings = {"memorySearch": {"chunking": {"sessions": {"tokens": 16, "overlap": 0}}}}
    world.assistant.save()
    session = factories.make_session(world.assistant, key="chat")
    long = "We agreed to move the heron cluster to the new region after the audit. " * 3
    factories.add_messages(
        session,
        {"role": "user", "content": "Short question?"},
        {"role": "assistant", "content": long},
        {"role": "user", "content": "Thanks!"},
    )
    index_session_transcript(session.pk)
    texts = list(
        MemoryChunk.objects.filter(assistant=world.assistant)
        .order_by("start_line")
        .values_list("text", flat=True)
    )
    # 16 tokens is 64 characters; the 200-character message still is one chunk, whole.
    assert f"Assistant: {long.strip()}" in texts
