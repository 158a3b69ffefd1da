"""Give revisions written before provenance existed an origin, a trust class and line origins.

The origin follows the author and the note (docs/design.md, Provenance, consolidation and
forgetting): ``user`` with a note naming an API key is that key, ``agent`` notes name the key
the agent connected with, ``flush`` is the flush of its session, ``import`` is untrusted. The line
origins are computed revision by revision, oldest first, the way `memory_app.documents` computes
them at write time.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import migrations

from memory_app.governance.lines import SELF, carry_origins, decode_runs, encode_runs, split_lines

KEY_NOTE = re.compile(r"api key (?P<name>.+) \((?P<prefix>[^()]+)\)")

KIND = {"user": "person", "admin": "person", "agent": "agent", "flush": "flush", "import": "import"}
TRUST = {"person": "owner", "api_key": "agent", "agent": "agent", "flush": "agent", "import": "untrusted"}


def _origin(revision: Any, keys: dict[str, tuple[int, str]]) -> dict[str, Any]:
    kind = KIND.get(revision.author, "person")
    fields: dict[str, Any] = {}
    match = KEY_NOTE.search(revision.note or "")
    if match and match["prefix"] in keys:
        fields["api_key_pk"], fields["api_key_name"] = keys[match["prefix"]]
        if kind == "person" and revision.user_id is None:
            kind = "api_key"
    fields["origin_kind"], fields["trust"] = kind, TRUST[kind]
    return fields


def backfill(apps: Any, schema_editor: Any) -> None:
    revision_model = apps.get_model("memory_app", "MemoryRevision")
    api_key_model = apps.get_model("openclaw_site", "ApiKey")
    keys = {
        prefix: (pk, name) for pk, prefix, name in api_key_model.objects.values_list("pk", "prefix", "name")
    }
    previous: dict[tuple[int, str], tuple[list[str], list[int]]] = {}
    for revision in revision_model.objects.order_by("assistant_id", "path", "created_at", "id").iterator():
        lines = split_lines(revision.content)
        before = previous.get((revision.assistant_id, revision.path))
        origins = carry_origins(before[0], before[1], lines, SELF) if before else [SELF] * len(lines)
        for name, value in _origin(revision, keys).items():
            setattr(revision, name, value)
        revision.line_origins = encode_runs(origins)
        revision.save(update_fields=["origin_kind", "trust", "api_key_pk", "api_key_name", "line_origins"])
        if revision.action == "delete":  # a document created later at this path starts afresh
            previous.pop((revision.assistant_id, revision.path), None)
        else:
            previous[(revision.assistant_id, revision.path)] = (
                lines,
                decode_runs(revision.line_origins, own=revision.pk),
            )


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0013_provenance"),
        ("openclaw_site", "0001_initial"),
    ]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
