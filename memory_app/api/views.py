"""REST endpoints for memory documents, their line ranges and their revisions.

Writes go through memory_app.documents with ``author="user"``, so each leaves a revision and
triggers the reindex and the export like any other write.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, NotRequired, TypedDict

from django.conf import settings
from django.db.models import Case, F, Func, IntegerField, QuerySet, Value, When
from django.db.models.functions import Length, Replace
from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.serializers import (
    DocumentCreateInput,
    DocumentOutput,
    DocumentPutInput,
    DocumentSummaryOutput,
    DocumentWriteOutput,
    LineRange,
    LineRangeOutput,
    RevisionOutput,
    count_lines,
)
from memory_app.documents import (
    Duplicate,
    DuplicateLine,
    Provenance,
    agent_append_daily_note,
    agent_replace_document,
    create_document,
    delete_document,
    read_lines,
    write_document,
)
from memory_app.governance.provenance import line_provenance, lines_provenance
from memory_app.models import Author, MemoryDocument, MemoryRevision, RevisionAction
from memory_app.paths import InvalidPath, validate_memory_path
from memory_app.selectors import document_get, document_list, revision_list
from openclaw_site.api.base import (
    TeamApiView,
    not_found,
    page_meta_fields,
    paginate,
    query_bool,
    query_int,
    validated,
)
from openclaw_site.errors import ApiError
from openclaw_site.models import Assistant, Scope
from openclaw_site.selectors import assistant_get

DocumentList = inline_serializer("MemoryDocumentList", {"documents": DocumentSummaryOutput(many=True)})
RevisionList = inline_serializer(
    "MemoryRevisionList",
    {
        "revisions": RevisionOutput(many=True),
        **page_meta_fields(),
    },
)
PATH_PARAMETER = OpenApiParameter(
    "path",
    str,
    OpenApiParameter.PATH,
    description="MEMORY.md, memory.md or memory/**/*.md (slashes allowed).",
)


def octet_length(field: str) -> Func:
    """Return the UTF-8 size of a text column, computed by Postgres."""
    return Func(F(field), function="octet_length", output_field=IntegerField())


def with_stats(documents: QuerySet) -> QuerySet:
    """Annotate size (UTF-8 bytes) and lines in SQL, so a listing never loads the texts."""
    newlines = Length("content") - Length(Replace("content", Value("\n"), Value("")))
    last_line = Case(
        When(content="", then=Value(0)), When(content__endswith="\n", then=Value(0)), default=Value(1)
    )
    return documents.annotate(
        size=octet_length("content"),
        lines=newlines + last_line,
    )


class MemoryWritten(TypedDict):
    """``memory_write``'s answer (MCP and the OpenClaw plugin): the document without its text, the
    revision; an append also says what it left out."""

    path: str
    size: int
    lines: int
    content_hash: str
    created_at: datetime
    updated_at: datetime
    revision: int | None
    changed: bool
    duplicates: NotRequired[list[DuplicateLine]]
    forgotten: NotRequired[int]


def _written(document: MemoryDocument, *, revision: int | None, changed: bool) -> MemoryWritten:
    return {
        "path": document.path,
        "size": len(document.content.encode()),
        "lines": count_lines(document.content),
        "content_hash": document.content_hash,
        "created_at": document.created_at,
        "updated_at": document.updated_at,
        "revision": revision,
        "changed": changed,
    }


def checked_path(path: Any) -> str:
    """Return an allowed memory path, or raise 400 ``invalid_path`` with the reason."""
    try:
        return validate_memory_path(path)
    except InvalidPath as error:
        raise ApiError(
            "invalid_path",
            f"Invalid memory path: {error}.",
            details={"field": "path", "path": path, "reason": str(error)},
        ) from None


def check_size(content: str) -> None:
    """Refuse a document over OPENCLAW_MAX_MEMORY_DOCUMENT_BYTES with 413."""
    size = len(content.encode())
    if size > settings.MAX_MEMORY_DOCUMENT_BYTES:
        raise ApiError(
            "payload_too_large",
            f"The document is {size} bytes; the limit is {settings.MAX_MEMORY_DOCUMENT_BYTES}.",
            status_code=413,
            details={"field": "content", "limit": settings.MAX_MEMORY_DOCUMENT_BYTES},
        )


def memory_write_payload(
    assistant: Assistant,
    *,
    mode: str,
    content: str,
    path: str | None,
    base_revision: int | None,
    provenance: Provenance,
    today: date,
) -> MemoryWritten:
    """Run the agents' ``memory_write`` (MCP and the OpenClaw plugin): append to today's daily note,
    or replace a document from the revision the agent read (docs/integrations.md, the tool table)."""
    check_size(content)
    revision: MemoryRevision | None
    duplicates: tuple[Duplicate, ...] = ()
    forgotten = 0
    if mode == "append":
        if path is not None or base_revision is not None:
            raise ApiError(
                "invalid_parameter",
                "append always writes today's daily note: leave out path and base_revision.",
                details={"field": "path" if path is not None else "base_revision"},
            )
        outcome = agent_append_daily_note(
            assistant=assistant, text=content, today=today, provenance=provenance
        )
        document, revision, duplicates = outcome.document, outcome.revision, outcome.duplicates
        forgotten = outcome.forgotten
    elif mode == "replace":
        if path is None:
            raise ApiError(
                "invalid_parameter", "replace needs the document's path.", details={"field": "path"}
            )
        document, revision = agent_replace_document(
            assistant=assistant,
            path=checked_path(path),
            content=content,
            base_revision=base_revision,
            provenance=provenance,
        )
    else:
        raise ApiError("invalid_parameter", "mode must be append or replace.", details={"field": "mode"})
    answer = _written(
        document, revision=revision.pk if revision else base_revision, changed=revision is not None
    )
    if mode == "append":  # the lines memory already held, left out (memory_app.documents)
        answer["duplicates"] = [duplicate.as_dict() for duplicate in duplicates]
        answer["forgotten"] = (
            forgotten  # lines of a forgotten source, left out (memory_app.governance.forgotten)
        )
    return answer


class MemoryApiView(TeamApiView):
    read_scope = Scope.MEMORY_READ
    write_scope = Scope.MEMORY_WRITE

    def provenance(self) -> Provenance:
        """API writes are authored by "user": the signed-in user, or the API key named in the note."""
        key = self.team_context.api_key
        note = f"api key {key.name} ({key.prefix})" if key is not None else ""
        return Provenance(
            author=Author.USER,
            user=self.acting_user(),
            note=note,
            api_key_pk=key.pk if key is not None else None,
            api_key_name=key.name if key is not None else "",
        )


class MemoryListCreateApi(MemoryApiView):
    """``GET, POST /assistants/{slug}/memory/``."""

    @extend_schema(operation_id="memory_list", responses=DocumentList)
    def get(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        documents = with_stats(document_list(assistant=assistant))
        return Response({"documents": DocumentSummaryOutput(documents, many=True).data})

    @extend_schema(
        operation_id="memory_create", request=DocumentCreateInput, responses={201: DocumentWriteOutput}
    )
    def post(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        data = validated(DocumentCreateInput, self.json_object())
        path = checked_path(data["path"])
        check_size(data["content"])
        # Create only: an existing path, or one a concurrent create took first, is DocumentExists.
        document, revision = create_document(
            assistant=assistant, path=path, content=data["content"], provenance=self.provenance()
        )
        output = DocumentWriteOutput(document, context={"revision": revision})
        return Response(output.data, status=status.HTTP_201_CREATED)


class MemoryDocumentApi(MemoryApiView):
    """``GET, PUT, DELETE /assistants/{slug}/memory/{path}``; ``GET ?from=&lines=`` reads a line range."""

    @extend_schema(
        operation_id="memory_retrieve",
        parameters=[
            PATH_PARAMETER,
            OpenApiParameter("from", int, description="First line (1-based), like memory_get."),
            OpenApiParameter("lines", int, description="How many lines."),
            OpenApiParameter(
                "provenance",
                bool,
                description="Add `provenance`: per line its origin (kind, who, through what), trust and time.",
            ),
        ],
        responses={
            200: PolymorphicProxySerializer(
                component_name="MemoryDocumentOrLines",
                serializers=[DocumentOutput, LineRangeOutput],
                resource_type_field_name=None,
            )
        },
        description="The whole document; with `from` or `lines`, that line range instead (like memory_get).",
    )
    def get(self, request: Request, slug: str, path: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        document = document_get(assistant=assistant, path=checked_path(path))
        start = query_int(request, "from", minimum=1)
        count = query_int(request, "lines", minimum=1)
        with_provenance = query_bool(request, "provenance", default=False)
        if start is None and count is None:
            body = DocumentOutput(document).data
            if with_provenance:
                body["provenance"] = line_provenance(document)
            return Response(body)
        text, first, returned, total = read_lines(document.content, start=start, count=count)
        window = LineRange(document=document, text=text, first=first, lines=returned, total_lines=total)
        body = LineRangeOutput(window).data
        if with_provenance:
            body["provenance"] = lines_provenance(document, range(first, first + returned))
        return Response(body)

    @extend_schema(
        operation_id="memory_put",
        parameters=[PATH_PARAMETER],
        request=DocumentPutInput,
        responses={200: DocumentWriteOutput, 201: DocumentWriteOutput},
    )
    def put(self, request: Request, slug: str, path: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        path = checked_path(path)
        data = validated(DocumentPutInput, self.json_object())
        check_size(data["content"])
        document, revision = write_document(  # a changed document is StaleWrite (409)
            assistant=assistant,
            path=path,
            content=data["content"],
            provenance=self.provenance(),
            expected_hash=data.get("expected_hash"),
        )
        created = revision is not None and revision.action == RevisionAction.CREATE
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(DocumentWriteOutput(document, context={"revision": revision}).data, status=code)

    @extend_schema(operation_id="memory_destroy", parameters=[PATH_PARAMETER], responses={204: None})
    def delete(self, request: Request, slug: str, path: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        document = document_get(assistant=assistant, path=checked_path(path))
        delete_document(document=document, provenance=self.provenance())
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryRevisionsApi(MemoryApiView):
    """``GET /assistants/{slug}/memory/{path}/revisions/``: newest first, kept after a delete."""

    @extend_schema(
        operation_id="memory_revisions",
        responses=RevisionList,
        parameters=[
            PATH_PARAMETER,
            OpenApiParameter("include_content", bool),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
    )
    def get(self, request: Request, slug: str, path: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        path = checked_path(path)
        include_content = query_bool(request, "include_content", default=False)
        revisions = revision_list(assistant=assistant, path=path).annotate(size=octet_length("content"))
        if not include_content:
            revisions = revisions.defer("content")
        page = paginate(request, revisions)
        if page.count == 0:
            raise not_found(f"Memory document {path!r}")
        return Response(
            {
                "revisions": RevisionOutput(page.items, many=True, include_content=include_content).data,
                **page.meta(),
            }
        )
