"""One HNSW graph per assistant instead of one per embedding size (memory_app/index/vectors.py).

Every search is filtered to one assistant; a graph shared by all of them made a small
assistant's search walk other teams' vectors (docs/design.md, "Search at a million chunks").
Assistants that already hold `MIN_ROWS` vectors of a size get their own index here; the others
are searched exactly until `ensure_vector_index` gives them one. The SQL is written out so this
migration never changes behind our back. Reversing it brings the shared indexes back.
"""

from django.db import migrations

MIN_ROWS = 5_000
SHARED_DIMS = (384, 1536)


def _create(dims: int, assistant_id: int) -> str:
    kind = f"vector({dims})" if dims <= 2000 else f"halfvec({dims})"
    ops = "vector_cosine_ops" if dims <= 2000 else "halfvec_cosine_ops"
    return (
        f"CREATE INDEX IF NOT EXISTS memchunk_hnsw_{dims}_a{assistant_id} ON memory_app_memorychunk "
        f"USING hnsw ((embedding::{kind}) {ops}) WITH (m = 16, ef_construction = 128) "
        f"WHERE assistant_id = {assistant_id} AND dims = {dims}"
    )


def split(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT assistant_id, dims FROM memory_app_memorychunk WHERE dims BETWEEN 1 AND 4000 "
            "GROUP BY assistant_id, dims HAVING count(*) >= %s",
            [MIN_ROWS],
        )
        pairs = cursor.fetchall()
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for assistant_id, dims in pairs:
            cursor.execute(_create(int(dims), int(assistant_id)))
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_app_memorychunk' "
            "AND indexname ~ '^memchunk_hnsw_[0-9]+$'"
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


def join(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        for dims in SHARED_DIMS:
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS memchunk_hnsw_{dims} ON memory_app_memorychunk "
                f"USING hnsw ((embedding::vector({dims})) vector_cosine_ops) "
                f"WITH (m = 16, ef_construction = 128) WHERE dims = {dims}"
            )
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_app_memorychunk' "
            "AND indexname ~ '^memchunk_hnsw_[0-9]+_a[0-9]+$'"
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0018_consolidation_schedule"),
    ]

    operations = [migrations.RunPython(split, join)]
