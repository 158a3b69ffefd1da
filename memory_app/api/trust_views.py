"""REST endpoints of trusted memory: forget a source; consolidation proposals and their review.

docs/design.md, Provenance, consolidation and forgetting. Scopes as for memory writes: reading
proposals needs ``memory:read``, deciding them, consolidating and forgetting ``memory:write``
(a viewer reads proposals but cannot decide). The assistant and the proposal are looked up in the
caller's team only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.views import MemoryApiView
from memory_app.forget import SOURCE_FIELDS, forget_source, source_is_known
from memory_app.models import MemoryImport
from openclaw_site.api.base import StrictSerializer, not_found, validated
from openclaw_site.errors import ApiError
from openclaw_site.models import ApiKey, Assistant
from openclaw_site.selectors import assistant_get


class ForgetInput(StrictSerializer):
    session = serializers.IntegerField(required=False, min_value=1, help_text="A session id.")
    api_key = serializers.IntegerField(required=False, min_value=1, help_text="An API key id.")
    # "import" is a Python keyword: declared below.
    dry_run = serializers.BooleanField(
        required=False, default=True, help_text="true (default): report what would go, change nothing."
    )


ForgetInput._declared_fields["import"] = serializers.IntegerField(
    required=False, min_value=1, help_text="An import id (the `import` of a line's origin)."
)

ForgetOutput = inline_serializer(
    "ForgetOutput",
    {
        "source": serializers.DictField(),
        "dry_run": serializers.BooleanField(),
        "lines": serializers.ListField(child=serializers.DictField(), help_text="{path, line, text}"),
        "documents": serializers.ListField(
            child=serializers.DictField(), help_text="{path, lines_removed, deleted, revision}"
        ),
        "index_entries": serializers.DictField(help_text="{memory, sessions}: index rows removed"),
        "already_forgotten": serializers.BooleanField(),
    },
)


def _source(data: dict[str, Any]) -> tuple[str, int]:
    named = [(kind, data[kind]) for kind in SOURCE_FIELDS if data.get(kind) is not None]
    if len(named) != 1:
        raise ApiError(
            "invalid_parameter",
            "Name exactly one source: session, api_key or import.",
            details={"field": "source", "given": [kind for kind, _ in named]},
        )
    return named[0]


def _check_known(assistant: Assistant, kind: str, key: int) -> None:
    exists = {
        "api_key": lambda: ApiKey.objects.filter(team_id=assistant.team_id, pk=key).exists(),
        "import": lambda: MemoryImport.objects.filter(assistant=assistant, pk=key).exists(),
        "session": lambda: False,
    }[kind]
    if not (exists() or source_is_known(assistant, kind, key)):
        raise not_found(f"{kind.replace('_', ' ').title()} {key} in this assistant's memory")


class ForgetApi(MemoryApiView):
    """``POST /assistants/{slug}/forget/``: remove (or, by default, list) what a source wrote."""

    @extend_schema(operation_id="memory_forget", request=ForgetInput, responses={200: ForgetOutput})
    def post(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        data = validated(ForgetInput, self.json_object())
        kind, key = _source(data)
        _check_known(assistant, kind, key)
        base = self.provenance()
        provenance = replace(base, note=" · ".join(filter(None, [f"forget {kind} {key}", base.note])))
        report = forget_source(
            assistant=assistant, kind=kind, key=key, dry_run=data["dry_run"], provenance=provenance
        )
        return Response(report.as_dict())
