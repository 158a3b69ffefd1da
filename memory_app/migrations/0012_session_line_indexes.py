"""Index a transcript's rows by line, so an index run finds its last chunk, the rows it replaces
and the rows still waiting for a vector without reading the transcript's other rows
(docs/design.md, "A transcript indexed in slices, text first, vectors after").

Built concurrently: a server with many stored chunks keeps indexing and searching meanwhile.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory_app", "0011_text_only_rows"),
        ("openclaw_site", "0008_membership_last_used_at"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memorychunk",
            index=models.Index(
                fields=["session_pk", "generation", "start_line"], name="memchunk_session_lines"
            ),
        ),
        AddIndexConcurrently(
            model_name="memorychunk",
            index=models.Index(
                condition=models.Q(("model", "fts-only")),
                fields=["session_pk", "generation", "start_line"],
                name="memchunk_session_text_only",
            ),
        ),
        # The new index leads with the same column, so it serves every lookup by session too.
        RemoveIndexConcurrently(model_name="memorychunk", name="memchunk_session"),
    ]
