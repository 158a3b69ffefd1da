"""Keep more lexeme statistics for the tsvector column.

`memory_app.search.candidates.lexeme_stats` reads `pg_stats.most_common_elems` to tell common query
terms from rare ones; with the default target (100) only lexemes in about 1% of chunks are listed.
1000 lists about ten times as many, down to roughly 0.1% of chunks.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0003_vector_indexes"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memory_app_memorychunk ALTER COLUMN tsv SET STATISTICS 1000",
            "ALTER TABLE memory_app_memorychunk ALTER COLUMN tsv SET STATISTICS -1",
        ),
    ]
