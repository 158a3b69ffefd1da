"""Schedules name the task functions where they now live (`openclaw_site.jobs`)."""

from django.db import migrations

MOVED = {"openclaw_site.tasks.purge_task_records": "openclaw_site.jobs.retention.purge_task_records"}


def forwards(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for old, new in MOVED.items():
        Schedule.objects.filter(func=old).update(func=new)


def backwards(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for old, new in MOVED.items():
        Schedule.objects.filter(func=new).update(func=old)


class Migration(migrations.Migration):
    dependencies = [
        ("openclaw_site", "0010_usage_consolidation"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
