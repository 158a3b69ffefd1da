"""REST endpoints of trusted memory: forget a source; consolidation proposals and their review.

docs/design.md, Provenance, consolidation and forgetting. Scopes as for memory writes: reading
proposals needs ``memory:read``, deciding them, consolidating and forgetting ``memory:write``
(a viewer reads proposals but cannot decide). The assistant and the proposal are looked up in the
caller's team only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.views import MemoryApiView
from memory_app.governance.consolidation import approve_proposal, proposal_dict, reject_proposal
from memory_app.governance.forget import SOURCE_FIELDS, forget_source, source_is_known
from memory_app.governance.model_consolidation import Invalid, file_proposal
from memory_app.models import MemoryImport, Proposal
from memory_app.selectors import proposal_get, proposal_list
from openclaw_site.api.base import StrictCharField, StrictSerializer, not_found, validated
from openclaw_site.api.serializers import TaskOutput
from openclaw_site.errors import ApiError
from openclaw_site.jobs.status import task_status
from openclaw_site.jobs.tasks import TaskOwner, enqueue
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
    if kind == "api_key":
        exists = ApiKey.objects.filter(team_id=assistant.team_id, pk=key).exists()
    elif kind == "import":
        exists = MemoryImport.objects.filter(assistant=assistant, pk=key).exists()
    else:
        exists = False
    if not (exists or source_is_known(assistant, kind, key)):
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


# --- consolidation and review ------------------------------------------------------------------


class ProposalOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=Proposal.Kind.values)
    state = serializers.ChoiceField(choices=Proposal.State.values)
    documents = serializers.ListField(child=serializers.DictField(), help_text="{path, start_line, end_line}")
    new_text = serializers.CharField(allow_blank=True)
    sources = serializers.ListField(
        child=serializers.DictField(), help_text="{path, line, text, revision, trust}"
    )
    confidence = serializers.FloatField()
    diff = serializers.CharField(allow_blank=True, help_text="unified diff of the touched documents")
    reason = serializers.CharField(allow_blank=True)
    target_path = serializers.CharField(allow_blank=True, help_text="promote: the document the text joins")
    created_at = serializers.DateTimeField()
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)


ProposalList = inline_serializer("MemoryProposalList", {"proposals": ProposalOutput(many=True)})


class ApproveInput(StrictSerializer):
    new_text = StrictCharField(
        required=False, trim_whitespace=False, help_text="Edit the proposed text before approving."
    )

    def validate_new_text(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank: a merge keeps one line")
        return value


class ConsolidateApi(MemoryApiView):
    """``POST /assistants/{slug}/consolidate/``: queue the consolidation pass, return the task."""

    @extend_schema(operation_id="memory_consolidate", request=None, responses={202: TaskOutput})
    def post(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        record = enqueue(
            "memory_app.tasks.consolidate_assistant",
            assistant.pk,
            owner=TaskOwner.for_assistant(assistant),
            kind="consolidate",
        )
        return Response(TaskOutput(task_status(record)).data, status=202)


class SourceInput(StrictSerializer):
    path = StrictCharField(max_length=255)
    line = serializers.IntegerField(min_value=1)


class FileProposalInput(StrictSerializer):
    kind = serializers.ChoiceField(choices=Proposal.Kind.values)
    sources = SourceInput(many=True, allow_empty=False)
    new_text = StrictCharField(
        required=False, default="", allow_blank=True, trim_whitespace=False, max_length=20000
    )
    target_path = StrictCharField(required=False, default="", allow_blank=True, max_length=255)
    confidence = serializers.FloatField(required=False, default=0.5, min_value=0, max_value=1)
    rationale = StrictCharField(required=False, default="", allow_blank=True, max_length=1000)

    def validate_sources(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(value) > 100:
            raise serializers.ValidationError("at most 100 sources")
        return value


def file_proposal_payload(assistant: Assistant, data: dict[str, Any], *, filed_by: str) -> dict[str, Any]:
    """File an agent's proposal (REST and the MCP ``memory_propose``), or 400 ``invalid_proposal``."""
    try:
        proposal = file_proposal(assistant, data, filed_by=filed_by)
    except Invalid as reason:
        raise ApiError(
            "invalid_proposal", f"The proposal was not filed: {reason}.", details={"reason": str(reason)}
        ) from None
    return proposal_dict(proposal)


class ProposalListApi(MemoryApiView):
    """``GET /assistants/{slug}/proposals/?state=open|approved|rejected`` (default open);
    ``POST`` files an agent's proposal, checked like the model's, for a person to review."""

    @extend_schema(
        operation_id="memory_proposal_file", request=FileProposalInput, responses={201: ProposalOutput}
    )
    def post(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        data = validated(FileProposalInput, self.json_object())
        key = self.team_context.api_key
        filed_by = f"api key {key.name}" if key is not None else str(self.acting_user() or "")
        return Response(file_proposal_payload(assistant, data, filed_by=filed_by), status=201)

    @extend_schema(
        operation_id="memory_proposals",
        parameters=[OpenApiParameter("state", str, enum=Proposal.State.values)],
        responses=ProposalList,
    )
    def get(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        state = request.query_params.get("state", Proposal.State.OPEN)
        if state not in Proposal.State.values:
            raise ApiError(
                "invalid_parameter",
                "state must be open, approved or rejected.",
                details={"field": "state"},
            )
        proposals = proposal_list(assistant=assistant, state=state)
        return Response({"proposals": [proposal_dict(p) for p in proposals]})


class ProposalApproveApi(MemoryApiView):
    """``POST /proposals/{id}/approve/``: apply it (optionally edited), one revision per document."""

    @extend_schema(
        operation_id="memory_proposal_approve",
        request=ApproveInput,
        responses=inline_serializer(
            "MemoryProposalApproved",
            {"proposal": ProposalOutput(), "revisions": serializers.ListField(child=serializers.DictField())},
        ),
    )
    def post(self, request: Request, pk: int) -> Response:
        proposal = proposal_get(team=self.team, pk=pk)
        data = validated(ApproveInput, self.json_object())  # an empty body is {}
        # ProposalStale / ProposalDecided are domain errors: the exception handler renders them.
        revisions = approve_proposal(proposal, provenance=self.provenance(), new_text=data.get("new_text"))
        proposal.refresh_from_db()
        return Response(
            {
                "proposal": proposal_dict(proposal),
                "revisions": [{"id": r.pk, "path": r.path} for r in revisions],
            }
        )


class ProposalRejectApi(MemoryApiView):
    """``POST /proposals/{id}/reject/``: remembered; the pass does not propose it again."""

    @extend_schema(operation_id="memory_proposal_reject", request=None, responses=ProposalOutput)
    def post(self, request: Request, pk: int) -> Response:
        proposal = proposal_get(team=self.team, pk=pk)
        proposal = reject_proposal(proposal, provenance=self.provenance())
        return Response(proposal_dict(proposal))
