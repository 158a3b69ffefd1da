"""One partial HNSW cosine index per embedding size, on a cast expression (memory_app/index/vectors.py).

The SQL is written out here rather than imported so this migration never changes behind our back.
Other sizes get their index from `memory_app.index.vectors.ensure_vector_index` when first used.
"""

from django.db import migrations


def _sql(dims: int) -> str:
    return (
        f"CREATE INDEX IF NOT EXISTS memchunk_hnsw_{dims} ON memory_app_memorychunk "
        f"USING hnsw ((embedding::vector({dims})) vector_cosine_ops) WHERE dims = {dims}"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0002_search_index"),
    ]

    operations = [
        migrations.RunSQL(_sql(384), "DROP INDEX IF EXISTS memchunk_hnsw_384"),
        migrations.RunSQL(_sql(1536), "DROP INDEX IF EXISTS memchunk_hnsw_1536"),
    ]
