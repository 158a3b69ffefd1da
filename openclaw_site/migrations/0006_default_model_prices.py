"""Default prices of common models, in US dollars per million tokens (docs/design.md, Usage and cost).

The providers' list prices as published in 2025; admins correct them in Django admin. Local
models cost nothing and are listed at zero so they count as priced.
"""

from decimal import Decimal

from django.db import migrations

# model: (input, output, cache read, cache write)
DEFAULT_PRICES = {
    "gpt-4o": ("2.50", "10.00", "1.25", "0"),
    "gpt-4o-mini": ("0.15", "0.60", "0.075", "0"),
    "gpt-4.1": ("2.00", "8.00", "0.50", "0"),
    "gpt-4.1-mini": ("0.40", "1.60", "0.10", "0"),
    "gpt-4.1-nano": ("0.10", "0.40", "0.025", "0"),
    "o4-mini": ("1.10", "4.40", "0.275", "0"),
    "claude-sonnet-4": ("3.00", "15.00", "0.30", "3.75"),
    "claude-3-7-sonnet": ("3.00", "15.00", "0.30", "3.75"),
    "claude-3-5-sonnet": ("3.00", "15.00", "0.30", "3.75"),
    "claude-haiku-4-5": ("1.00", "5.00", "0.10", "1.25"),
    "claude-3-5-haiku": ("0.80", "4.00", "0.08", "1.00"),
    "claude-opus-4": ("15.00", "75.00", "1.50", "18.75"),
    "text-embedding-3-small": ("0.02", "0", "0", "0"),
    "text-embedding-3-large": ("0.13", "0", "0", "0"),
    "sentence-transformers/all-MiniLM-L6-v2": ("0", "0", "0", "0"),
}


def seed_prices(apps, schema_editor):
    ModelPrice = apps.get_model("openclaw_site", "ModelPrice")
    for model, figures in DEFAULT_PRICES.items():
        inputs, output, cache_read, cache_write = (Decimal(f) for f in figures)
        ModelPrice.objects.get_or_create(
            model=model,
            defaults={
                "input_per_mtok": inputs,
                "output_per_mtok": output,
                "cache_read_per_mtok": cache_read,
                "cache_write_per_mtok": cache_write,
            },
        )


def remove_prices(apps, schema_editor):
    apps.get_model("openclaw_site", "ModelPrice").objects.filter(model__in=DEFAULT_PRICES).delete()


class Migration(migrations.Migration):
    dependencies = [("openclaw_site", "0005_usage_ledger")]

    operations = [migrations.RunPython(seed_prices, remove_prices)]
