"""Rebuild the prebuilt HNSW indexes with ef_construction 128 (memory_app/index/vectors.py).

With pgvector's default (64) the graph of 100k MiniLM chunks answers only about 91% of the exact
top 10 at ef_search 100; 128 brings it to 95% and more (bench/search.py, README). Indexes of other
sizes made by `ensure_vector_index` already use the new options. The SQL is written out so this
migration never changes behind our back.
"""

from django.db import migrations


def _sql(dims: int, options: str) -> str:
    return (
        f"DROP INDEX IF EXISTS memchunk_hnsw_{dims}; "
        f"CREATE INDEX memchunk_hnsw_{dims} ON memory_app_memorychunk "
        f"USING hnsw ((embedding::vector({dims})) vector_cosine_ops){options} WHERE dims = {dims}"
    )


NEW = " WITH (m = 16, ef_construction = 128)"


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0005_refresh_schedule"),
    ]

    operations = [
        migrations.RunSQL(_sql(384, NEW), _sql(384, "")),
        migrations.RunSQL(_sql(1536, NEW), _sql(1536, "")),
    ]
