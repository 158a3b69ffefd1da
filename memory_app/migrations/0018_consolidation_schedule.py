"""Schedule `memory_app.tasks.nightly_consolidation` every hour (docs/design.md, Provenance,
consolidation and forgetting: each assistant is consolidated at its `memoryConsolidation.hour`)."""

from django.db import migrations

NAME = "memory-nightly-consolidation"


def create_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={
            "func": "memory_app.tasks.nightly_consolidation",
            "schedule_type": "H",
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0017_consolidation_kinds"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
