"""Drop the index on Message.session alone: the unique (session, seq) and (session, entry_id)
indexes lead with the column, so it served no query and cost every append a third index write.

Only the index goes (`RunSQL`); Django's own AlterField would drop and re-add the foreign key,
which re-checks every row of a large table under a lock.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0005_session_archived_at"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="sessions_app.session",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "sessions_app_message_session_id_a5aec9af"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "sessions_app_message_session_id_a5aec9af" '
                    'ON "sessions_app_message" ("session_id")',
                ),
            ],
        ),
    ]
