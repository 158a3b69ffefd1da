"""Embedding fixtures for index and search tests: FakeOpenAI vectors, none, or the local MiniLM."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from providers.embeddings import reset_embedders
from tests.fake_openai import FakeOpenAI


@pytest.fixture
def fake_embeddings(settings, fake_openai: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """Point EMBEDDING_* at FakeOpenAI (hashed bag-of-words vectors, 384 dimensions)."""
    settings.EMBEDDING_PROVIDER = "openai"
    settings.EMBEDDING_BASE_URL = fake_openai.base_url
    settings.EMBEDDING_MODEL = "fake-embedding"
    settings.EMBEDDING_DIMENSIONS = 384
    reset_embedders()
    yield fake_openai
    reset_embedders()


@pytest.fixture
def no_embeddings(settings) -> Iterator[None]:
    settings.EMBEDDING_PROVIDER = "none"
    reset_embedders()
    yield
    reset_embedders()


@pytest.fixture
def local_embeddings(settings) -> Iterator[None]:
    """Use the bundled all-MiniLM-L6-v2 (loaded once per test process)."""
    settings.EMBEDDING_PROVIDER = "local"
    reset_embedders()
    yield
    reset_embedders()


def embedded_texts(server: FakeOpenAI) -> list[str]:
    """Return every text FakeOpenAI was asked to embed, in order."""
    texts: list[str] = []
    for body in server.embedding_requests:
        value = body.get("input")
        texts.extend([value] if isinstance(value, str) else list(value or []))
    return texts
