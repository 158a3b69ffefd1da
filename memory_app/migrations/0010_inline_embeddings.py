"""Keep a chunk's embedding in its row (docs/design.md, Where a vector is stored).

A 384-dimension vector (1.5 KB) with its text and tsvector makes a row of about 2.3 KB, over
PostgreSQL's 2 KB toasting threshold, and a vector's default storage (EXTERNAL) moved it out of
line first: an exact scan, which the planner picks for an assistant of up to some 10k chunks,
then read every vector back from the TOAST table (28k buffers, 30-40 ms at 10k chunks; the
planner does not count that cost). MAIN storage keeps the vector in the row while the text and
tsvector can be compressed instead, and a toasting threshold of 4 KB keeps an ordinary chunk whole:
the same search takes 3-5 ms. Rows already stored keep their layout until they are written again
(a full reindex writes every chunk anew).
"""

from django.db import migrations

TABLE = "memory_app_memorychunk"


class Migration(migrations.Migration):
    dependencies = [("memory_app", "0009_debounce_due_by")]

    operations = [
        migrations.RunSQL(
            sql=[
                f"ALTER TABLE {TABLE} ALTER COLUMN embedding SET STORAGE MAIN",
                f"ALTER TABLE {TABLE} SET (toast_tuple_target = 4080)",
            ],
            reverse_sql=[
                f"ALTER TABLE {TABLE} ALTER COLUMN embedding SET STORAGE EXTERNAL",
                f"ALTER TABLE {TABLE} RESET (toast_tuple_target)",
            ],
        )
    ]
