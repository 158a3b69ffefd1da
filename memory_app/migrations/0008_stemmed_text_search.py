"""The full-text configuration `openclaw_search`: `simple` with English stems for ASCII words.

`simple` (lowercasing only) kept "decided" and "decide" apart, so a question in other words
found nothing (docs/design.md §D6). This configuration copies `simple` and sends plain ASCII
words, and the ASCII parts of hyphenated words, through a Snowball English stemmer without a
stop list; every other token type (hosts such as `memorySearch.query.hybrid`, files, paths,
numbers and hashes, CJK runs) stays exactly as `simple` indexes it. The index itself is rebuilt
by the fingerprint (`memory_app.index.config.INDEX_FORMAT_VERSION`).
"""

from django.db import migrations

CREATE = """
CREATE TEXT SEARCH DICTIONARY openclaw_english_stem (TEMPLATE = pg_catalog.snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION openclaw_search (COPY = pg_catalog.simple);
ALTER TEXT SEARCH CONFIGURATION openclaw_search
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart WITH openclaw_english_stem;
"""
DROP = """
DROP TEXT SEARCH CONFIGURATION IF EXISTS openclaw_search;
DROP TEXT SEARCH DICTIONARY IF EXISTS openclaw_english_stem;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0007_revision_rename"),
    ]

    operations = [migrations.RunSQL(CREATE, DROP)]
