from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0007_running_tokens")]

    operations = [
        migrations.AddField(
            model_name="session",
            name="host_token_budget",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="TurnCommit",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("advancement_key", models.CharField(max_length=200)),
                ("first_seq", models.PositiveIntegerField()),
                ("last_seq", models.PositiveIntegerField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="turn_commits",
                        to="sessions_app.session",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("session", "advancement_key"), name="turn_commit_key_unique"
                    )
                ],
            },
        ),
    ]
