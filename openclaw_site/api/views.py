"""REST endpoints for assistants (with their settings), API keys and background tasks."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from openclaw_site.api import schema  # noqa: F401  (registers the Bearer scheme with drf-spectacular)
from openclaw_site.api.base import TeamApiView, validated
from openclaw_site.api.serializers import (
    ApiKeyCreatedOutput,
    ApiKeyCreateInput,
    ApiKeyOutput,
    AssistantCreateInput,
    AssistantOutput,
    AssistantUpdateInput,
    TaskOutput,
    UsageQueryInput,
    UsageReportOutput,
)
from openclaw_site.guards.auth import check_scope
from openclaw_site.jobs.status import task_read_scopes, task_status
from openclaw_site.models import Scope
from openclaw_site.selectors import (
    api_key_get,
    api_key_list,
    assistant_get,
    assistant_list,
    task_record_get,
    usage_records,
)
from openclaw_site.teams import services
from openclaw_site.usage import ledger as usage

ASSISTANT_READ_SCOPES = (Scope.SESSIONS_READ, Scope.MEMORY_READ)

AssistantList = inline_serializer("AssistantList", {"assistants": AssistantOutput(many=True)})
ApiKeyList = inline_serializer("ApiKeyList", {"api_keys": ApiKeyOutput(many=True)})


class AssistantListCreateApi(TeamApiView):
    """``GET, POST /assistants/``."""

    read_scope = ASSISTANT_READ_SCOPES
    write_scope = Scope.ADMIN

    @extend_schema(operation_id="assistants_list", responses=AssistantList)
    def get(self, request: Request) -> Response:
        assistants = assistant_list(team=self.team)
        return Response({"assistants": AssistantOutput(assistants, many=True).data})

    @extend_schema(
        operation_id="assistants_create",
        request=AssistantCreateInput,
        responses={201: AssistantOutput, 409: OpenApiResponse(description="slug taken")},
    )
    def post(self, request: Request) -> Response:
        data = validated(AssistantCreateInput, self.json_object())
        assistant = services.assistant_create(team=self.team, **data)
        return Response(AssistantOutput(assistant).data, status=status.HTTP_201_CREATED)


class AssistantDetailApi(TeamApiView):
    """``GET, PATCH, DELETE /assistants/{slug}/``."""

    read_scope = ASSISTANT_READ_SCOPES
    write_scope = Scope.ADMIN

    @extend_schema(operation_id="assistants_retrieve", responses=AssistantOutput)
    def get(self, request: Request, slug: str) -> Response:
        return Response(AssistantOutput(assistant_get(team=self.team, slug=slug)).data)

    @extend_schema(
        operation_id="assistants_update",
        request=AssistantUpdateInput,
        responses=AssistantOutput,
        description="Change fields; `settings` is merged onto the current settings and validated.",
    )
    def patch(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        data = validated(AssistantUpdateInput, self.json_object())
        assistant = services.assistant_update(assistant=assistant, **data)
        return Response(AssistantOutput(assistant).data)

    @extend_schema(operation_id="assistants_destroy", responses={204: None})
    def delete(self, request: Request, slug: str) -> Response:
        services.assistant_delete(assistant=assistant_get(team=self.team, slug=slug))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ApiKeyListCreateApi(TeamApiView):
    """``GET, POST /api-keys/``: the team's keys; a new key's secret is in the POST response only."""

    read_scope = Scope.ADMIN
    write_scope = Scope.ADMIN

    @extend_schema(operation_id="api_keys_list", responses=ApiKeyList)
    def get(self, request: Request) -> Response:
        keys = api_key_list(team=self.team)
        return Response({"api_keys": ApiKeyOutput(keys, many=True).data})

    @extend_schema(
        operation_id="api_keys_create", request=ApiKeyCreateInput, responses={201: ApiKeyCreatedOutput}
    )
    def post(self, request: Request) -> Response:
        data = validated(ApiKeyCreateInput, self.json_object())
        key, secret = services.api_key_create(team=self.team, created_by=self.acting_user(), **data)
        output = ApiKeyCreatedOutput(key, context={"secret": secret})  # shown once; never stored
        return Response(output.data, status=status.HTTP_201_CREATED)


class ApiKeyRevokeApi(TeamApiView):
    """``DELETE /api-keys/{id}/``: revoke (the row stays, so its use stays attributable)."""

    read_scope = Scope.ADMIN
    write_scope = Scope.ADMIN

    @extend_schema(operation_id="api_keys_revoke", responses={200: ApiKeyOutput})
    def delete(self, request: Request, key_id: int) -> Response:
        key = api_key_get(team=self.team, pk=key_id)
        return Response(ApiKeyOutput(services.api_key_revoke(key=key)).data)


class TaskDetailApi(TeamApiView):
    """``GET /tasks/{id}/``: state, progress and result of a background task of the caller's team.

    The caller needs the read scope of what the task works on (`openclaw_site.jobs.status.TASK_KIND_SCOPES`).
    """

    @extend_schema(operation_id="tasks_retrieve", responses=TaskOutput)
    def get(self, request: Request, task_id: str) -> Response:
        record = task_record_get(team=self.team, task_id=task_id)
        check_scope(self.team_context, task_read_scopes(record.kind))
        return Response(TaskOutput(task_status(record)).data)


class UsageApi(TeamApiView):
    """``GET /usage/``: the team's tokens and cost, totalled and broken down (docs/design.md, Usage and cost)."""

    read_scope = ASSISTANT_READ_SCOPES

    @extend_schema(
        operation_id="usage_retrieve",
        parameters=[UsageQueryInput],
        responses={200: UsageReportOutput},
    )
    def get(self, request: Request) -> Response:
        query = validated(UsageQueryInput, request.query_params.dict())
        slug = query.get("assistant")
        records = usage_records(
            team=self.team,
            assistant=assistant_get(team=self.team, slug=slug) if slug else None,
            session_id=query.get("session"),
            since=query.get("since"),
            until=query.get("until"),
        )
        by = query.get("by", "purpose")
        rows = usage.breakdown(records, by)
        report = usage.UsageReport(by=by, totals=usage.totals(records), rows=rows)
        return Response(UsageReportOutput(report).data)
