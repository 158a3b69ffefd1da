"""Coalescing task records (one pending job per key) and a schedule that purges old ones.

docs/design.md, Background work: `openclaw_site.jobs.retention.purge_task_records` runs every 10 minutes.
"""

from django.db import migrations, models

PURGE_SCHEDULE = "task-records-purge"


def create_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=PURGE_SCHEDULE,
        defaults={
            "func": "openclaw_site.jobs.retention.purge_task_records",
            "schedule_type": "I",
            "minutes": 10,
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=PURGE_SCHEDULE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("openclaw_site", "0003_taskrecord_owner"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.AddField(
            model_name="taskrecord",
            name="coalesce_key",
            field=models.CharField(blank=True, max_length=300, null=True),
        ),
        migrations.AddField(
            model_name="taskrecord",
            name="coalesced",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddIndex(
            model_name="taskrecord",
            index=models.Index(
                condition=models.Q(("finished_at__isnull", False)),
                fields=["finished_at"],
                name="taskrecord_finished",
            ),
        ),
        migrations.AddConstraint(
            model_name="taskrecord",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state", "queued")),
                fields=("coalesce_key",),
                name="taskrecord_one_pending_per_key",
            ),
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
