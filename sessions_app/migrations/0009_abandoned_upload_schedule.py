"""Schedule `sessions_app.tasks.remove_abandoned_uploads` every 10 minutes (docs/design.md, Limits
and refusals: staged import uploads nobody confirmed are removed)."""

from django.db import migrations

NAME = "sessions-abandoned-uploads"


def create_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={
            "func": "sessions_app.tasks.remove_abandoned_uploads",
            "schedule_type": "I",
            "minutes": 10,
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0008_host_turns"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
