"""What both evaluation commands share: the embedder they measure, and data that is rolled back
except the embeddings computed meanwhile.

Both evaluation commands load their sets into a new team inside one transaction and roll it
all back at the end; the embedding cache rows (vectors keyed by provider and text hash) are
kept, so the next run embeds nothing it embedded before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core.management.base import CommandParser
from django.db import connection, transaction

from memory_app.models import EmbeddingCache
from providers.embeddings import LOCAL_BACKENDS, Embedder, get_embedder, reset_embedders

T = TypeVar("T")


def rolled_back_keeping_embeddings(work: Callable[[], T]) -> T:
    """Run ``work`` in a transaction that is rolled back; keep the embeddings it cached."""
    kept: list[tuple[Any, ...]] = []
    with transaction.atomic():
        first_new = (EmbeddingCache.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
        try:
            result = work()
            kept = list(
                EmbeddingCache.objects.filter(id__gte=first_new).values_list(
                    "provider_key", "model", "hash", "dims", "embedding"
                )
            )
        finally:
            transaction.set_rollback(True)
    EmbeddingCache.objects.bulk_create(
        [EmbeddingCache(provider_key=p, model=m, hash=h, dims=d, embedding=e) for p, m, h, d, e in kept],
        ignore_conflicts=True,
        batch_size=500,
    )
    # ANALYZE's row count is not transactional: count again now that the rows are gone.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_app_memorychunk")
    return result


def add_embedder_argument(parser: CommandParser) -> None:
    parser.add_argument(
        "--embedder",
        choices=("local", *LOCAL_BACKENDS, "configured"),
        default="local",
        help="local: the default local model; a local model by name; configured: EMBEDDING_PROVIDER and co.",
    )


def evaluation_embedder(choice: str) -> Embedder:
    """Return the embedder to measure (LookupError: none is available).

    README's figures are for a local model whatever .env says; indexing reads the same settings,
    so they are changed for this process rather than passed along.
    """
    if choice != "configured":
        settings.EMBEDDING_PROVIDER = "local"
        if choice in LOCAL_BACKENDS:
            settings.EMBEDDING_LOCAL_MODEL = choice
        reset_embedders()
    embedder = get_embedder()
    if embedder is None:
        raise LookupError("no embedder is available (configured: EMBEDDING_PROVIDER and co.)")
    return embedder
