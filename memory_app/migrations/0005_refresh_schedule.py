"""Schedule `memory_app.tasks.refresh_indexes` every 10 minutes (docs/design.md, Background work: the periodic index refresh)."""

from django.db import migrations

NAME = "memory-index-refresh"


def create_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={
            "func": "memory_app.tasks.refresh_indexes",
            "schedule_type": "I",
            "minutes": 10,
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0004_tsv_statistics"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
