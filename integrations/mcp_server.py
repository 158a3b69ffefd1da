"""The MCP server's tools: memory search, reads and writes, session ingest and context (docs/design.md, MCP).

Each tool is a thin adapter: it checks the caller's scope (`openclaw_site.guards.auth.check_scope`, the
REST API's check), looks the assistant up in the caller's team (`openclaw_site.selectors`), calls
the function the REST endpoint calls, and returns the same shape. A refusal is an MCP tool error
(``isError``) whose text is our error envelope ``{"error": {"code", "message", "details"}}``.

Who calls, and for which assistant, comes from `integrations.mcp_http`, which authenticated the
request's API key and put an `McpCaller` on the ASGI scope's state. The ORM is synchronous, so
each call's work runs in a worker thread (`run_sync`), one database unit per call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Literal, TypedDict, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections, transaction
from django.utils import timezone
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from memory_app.api.search_views import SearchInput, search_payload
from memory_app.api.trust_views import FileProposalInput, file_proposal_payload
from memory_app.api.views import MemoryWritten, memory_write_payload
from memory_app.documents import Provenance
from memory_app.models import Author, MemoryDocument
from memory_app.tools import memory_get_payload
from openclaw_site.api.base import validated
from openclaw_site.errors import DATABASE_OUTAGE_ERRORS, ApiError, DomainError, database_error
from openclaw_site.guards.auth import TeamContext, check_scope
from openclaw_site.guards.idempotency import (
    MAX_KEY_LENGTH,
    StoredResponse,
    check_key,
    request_fingerprint,
    run_idempotent,
)
from openclaw_site.guards.throttling import check_api_key_rate
from openclaw_site.models import Assistant, Scope
from openclaw_site.selectors import assistant_get
from providers.json_types import JSONObject
from sessions_app.api.payloads import parse_message_payload
from sessions_app.api.responses import CONTEXT_ALSO_NEEDS, context_payload
from sessions_app.api.serializers import stored_messages_data
from sessions_app.context.prompt import local_today
from sessions_app.selectors import session_get_by_key
from sessions_app.services import SESSION_KEY_PATTERN, ingest_messages, session_get_or_create

T = TypeVar("T")
logger = logging.getLogger(__name__)
CALLER_STATE_KEY = "mcp_caller"

INSTRUCTIONS = (
    "Long-term memory and session transcripts of one assistant on an openclaw-site server. "
    "Search memory (memory_search) before answering questions about prior work, decisions, dates, "
    "people, preferences or todos, then read only the lines you need (memory_get). Store durable "
    "notes with memory_write (append to today's daily note). Agents that run their own loop record "
    "their conversation with session_append and see what the model would be sent with session_context."
)


@dataclass(frozen=True)
class McpCaller:
    """The authenticated caller of one MCP request and the assistant its URL names, if any."""

    context: TeamContext
    url_assistant: str | None = None


# --- calling the domain -----------------------------------------------------------------------


def tool_result(payload: Mapping[str, object]) -> CallToolResult:
    """Return a tool's answer: the JSON as text (what a model reads) and as structured content."""
    text = json.dumps(payload, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=json.loads(text))


def tool_error(error: DomainError) -> CallToolResult:
    """Return an MCP tool error (``isError``) carrying our error envelope (code, message, details):
    the MCP rendering of every domain error."""
    result = tool_result(error.envelope())
    return result.model_copy(update={"is_error": True})


def caller_of(ctx: Context) -> McpCaller:
    """Return the caller `integrations.mcp_http` put on the request's scope."""
    request = ctx.request_context.request
    caller = getattr(request, "scope", {}).get("state", {}).get(CALLER_STATE_KEY)
    if not isinstance(caller, McpCaller):
        raise RuntimeError(
            "No MCP caller on this request: the MCP app must be served by integrations.mcp_http."
        )
    return caller


def resolve_assistant(caller: McpCaller, argument: str | None) -> Assistant:
    """Return the one assistant of this call: the URL's (/mcp/<slug>/) or the `assistant` argument."""
    url_slug, slug = caller.url_assistant, (argument or "").strip() or None
    if url_slug and slug and url_slug != slug:
        raise ApiError(
            "assistant_mismatch",
            f"The URL names assistant {url_slug!r} but the call names {slug!r}; name one assistant.",
            details={"field": "assistant"},
        )
    chosen = slug or url_slug
    if chosen is None:
        raise ApiError(
            "assistant_required",
            "Name the assistant: pass `assistant` (its slug) or connect to /mcp/<assistant>/.",
            details={"field": "assistant"},
        )
    return assistant_get(team=caller.context.team, slug=chosen)


def run_sync(fn: Callable[[], T]) -> T:
    """Run one synchronous unit of database work as Django runs a request: stale connections closed around it."""
    close_old_connections()
    try:
        return fn()
    finally:
        close_old_connections()


async def call_tool(
    ctx: Context,
    *,
    scope: str,
    assistant: str | None,
    action: Callable[[Assistant, McpCaller], Mapping[str, object]],
) -> CallToolResult:
    """Check the key's rate and scope, resolve the assistant in the caller's team, run ``action``.

    Refusals are tool errors; the rate is the key's one budget across REST, `/v1/` and MCP
    (`openclaw_site.guards.throttling`). A call the database ended in a deadlock is the tool error
    `conflict_retry` (call it again), an outage `database_unavailable`, never the SDK's bare error.
    """
    caller = caller_of(ctx)

    def work() -> Mapping[str, object]:
        if caller.context.api_key is not None:  # each tool call takes one from the key's budget
            check_api_key_rate(caller.context.api_key)
        check_scope(caller.context, (scope,))
        return action(resolve_assistant(caller, assistant), caller)

    try:
        return tool_result(await sync_to_async(run_sync, thread_sensitive=False)(work))
    except DomainError as error:  # refusals are tool errors
        return tool_error(error)
    except DATABASE_OUTAGE_ERRORS as error:  # the call's transaction was rolled back
        failure = database_error(error)
        logger.warning("MCP tool call ended by the database (%s): %s", failure.code, error)
        return tool_error(failure)


# --- the tools --------------------------------------------------------------------------------

server = MCPServer(
    "openclaw-site", instructions=INSTRUCTIONS, log_level="WARNING", warn_on_duplicate_tools=True
)

AssistantArg = Annotated[
    str | None,
    Field(
        description=(
            "The assistant's slug. Leave it out when the server URL already names the assistant "
            "(/mcp/<assistant>/)."
        ),
        max_length=Assistant._meta.get_field("slug").max_length,
    ),
]
SessionKeyArg = Annotated[
    str,
    Field(
        description=(
            "The session's key, e.g. 'agent:main:main' or a conversation id: letters, digits and "
            ". _ : @ + = - (1 to 128 characters)."
        ),
        pattern=SESSION_KEY_PATTERN.pattern,
    ),
]
_SEARCH = SearchInput().fields
_PATH_MAX = MemoryDocument._meta.get_field("path").max_length


class _Bounds(TypedDict, total=False):
    ge: float
    le: float


def _bounds(name: str) -> _Bounds:
    """The bounds of a REST search parameter (`SearchInput`), so both adapters accept the same values."""
    field = _SEARCH[name]
    bounds: _Bounds = {}
    if (low := getattr(field, "min_value", None)) is not None:
        bounds["ge"] = low
    if (high := getattr(field, "max_value", None)) is not None:
        bounds["le"] = high
    return bounds


@server.tool(
    name="memory_search",
    title="Search memory",
    description=(
        "Search the assistant's long-term memory (MEMORY.md and memory/*.md) and, when enabled, its "
        "indexed session transcripts. Use it before answering about prior work, decisions, dates, "
        "people, preferences or todos. Returns the best snippets, each with its path, line range, "
        "score and a citation 'path#Lx-Ly'; read more of a document with memory_get. Hybrid (vector "
        "+ full-text) by default; `fallback` says why a different mode ran. `index.state` says how "
        "current the index is (current, indexing or stale) and `index.note`, when it is not, says in "
        "words that the results may be incomplete (recent text not yet indexed or found by keywords only)."
    ),
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
async def memory_search(
    ctx: Context,
    query: Annotated[
        str, Field(description="What to look for, in natural language.", min_length=1, max_length=2000)
    ],
    assistant: AssistantArg = None,
    max_results: Annotated[
        int | None, Field(description="At most this many results (default 6).", **_bounds("max_results"))
    ] = None,
    min_score: Annotated[
        float | None,
        Field(description="Drop results scoring below this (default 0.35).", **_bounds("min_score")),
    ] = None,
    sources: Annotated[
        list[Literal["memory", "sessions"]] | None,
        Field(
            description="Where to search: memory documents, session transcripts, or both (default: settings)."
        ),
    ] = None,
    mode: Annotated[
        Literal["hybrid", "vector", "text"] | None,
        Field(description="hybrid (default), vector (semantic only) or text (keywords only)."),
    ] = None,
    explain: Annotated[bool, Field(description="Add each result's scores, decay and MMR position.")] = False,
    mmr: Annotated[
        bool | None, Field(description="Diversify the results (maximal marginal relevance).")
    ] = None,
    mmr_lambda: Annotated[
        float | None,
        Field(description="MMR trade-off: 1 relevance only, 0 diversity only.", **_bounds("mmr_lambda")),
    ] = None,
    decay: Annotated[bool | None, Field(description="Prefer recent daily notes (temporal decay).")] = None,
    half_life_days: Annotated[
        float | None,
        Field(description="Half-life of the temporal decay in days.", **_bounds("half_life_days")),
    ] = None,
    vector_weight: Annotated[
        float | None,
        Field(description="Weight of the vector score in hybrid mode.", **_bounds("vector_weight")),
    ] = None,
    text_weight: Annotated[
        float | None,
        Field(description="Weight of the full-text score in hybrid mode.", **_bounds("text_weight")),
    ] = None,
    snippet_mode: Annotated[
        Literal["head", "best"] | None,
        Field(description="head: the chunk's first characters; best: the passage that matches best."),
    ] = None,
    snippet_max_chars: Annotated[
        int | None, Field(description="Longest snippet in characters.", **_bounds("snippet_max_chars"))
    ] = None,
) -> CallToolResult:
    knobs = {
        "max_results": max_results,
        "min_score": min_score,
        "sources": ",".join(sources) if sources else None,
        "mode": mode,
        "explain": explain,
        "mmr": mmr,
        "mmr_lambda": mmr_lambda,
        "decay": decay,
        "half_life_days": half_life_days,
        "vector_weight": vector_weight,
        "text_weight": text_weight,
        "snippet_mode": snippet_mode,
        "snippet_max_chars": snippet_max_chars,
    }
    params = {"q": query, **{key: value for key, value in knobs.items() if value is not None}}
    return await call_tool(
        ctx,
        scope=Scope.MEMORY_READ,
        assistant=assistant,
        action=lambda found, _caller: search_payload(found, params),
    )


@server.tool(
    name="memory_get",
    title="Read memory lines",
    description=(
        "Read lines of one memory document (MEMORY.md or memory/<name>.md), typically after "
        "memory_search, to pull only the lines you need. Without `from`/`lines` the first 120 lines "
        "are returned; a longer document ends with a notice naming the `from` to continue with "
        "(also in `nextFrom`). A missing document reads as empty. `revision` is the document's "
        "current revision: pass it as `base_revision` to memory_write to replace the document."
    ),
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
async def memory_get(
    ctx: Context,
    path: Annotated[
        str, Field(description="MEMORY.md or memory/<name>.md", min_length=1, max_length=_PATH_MAX)
    ],
    assistant: AssistantArg = None,
    from_line: Annotated[
        int | None, Field(validation_alias="from", description="First line to read (1-based).", ge=1)
    ] = None,
    lines: Annotated[int | None, Field(description="How many lines to read.", ge=1)] = None,
) -> CallToolResult:
    arguments = {"path": path, "from": from_line, "lines": lines}
    return await call_tool(
        ctx,
        scope=Scope.MEMORY_READ,
        assistant=assistant,
        action=lambda found, _caller: memory_get_payload(arguments, assistant=found, with_revision=True),
    )


@server.tool(
    name="memory_write",
    title="Write memory",
    description=(
        "Store durable memory. mode='append' adds `content` to today's daily note "
        "(memory/YYYY-MM-DD.md in the assistant's timezone), creating it if needed: use it for new "
        "facts, decisions and todos. mode='replace' sets the whole text of the document at `path`: "
        "first read it with memory_get and pass its `revision` as `base_revision` (leave "
        "`base_revision` out only to create a new document); if someone wrote in between, the call "
        "is refused with stale_write and you must read again. Every write is kept as a revision by "
        "'agent'. Refused (workspace_read_only) when the assistant's workspace is read-only."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False),
)
async def memory_write(
    ctx: Context,
    mode: Annotated[
        Literal["append", "replace"], Field(description="append to today's note, or replace a document.")
    ],
    content: Annotated[
        str,
        Field(description="append: the text to add (Markdown). replace: the document's complete new text."),
    ],
    assistant: AssistantArg = None,
    path: Annotated[
        str | None,
        Field(
            description="replace only: MEMORY.md or memory/<name>.md. Leave out for append.",
            max_length=_PATH_MAX,
        ),
    ] = None,
    base_revision: Annotated[
        int | None,
        Field(description="replace only: the `revision` memory_get returned for this document.", ge=1),
    ] = None,
) -> CallToolResult:
    def write(found: Assistant, caller: McpCaller) -> MemoryWritten:
        return memory_write_payload(
            found,
            mode=mode,
            content=content,
            path=path,
            base_revision=base_revision,
            provenance=_agent_provenance(caller),
            today=local_today(found, timezone.now()),
        )

    return await call_tool(ctx, scope=Scope.MEMORY_WRITE, assistant=assistant, action=write)


def _agent_provenance(caller: McpCaller) -> Provenance:
    """MCP writes are authored by "agent"; the note names the API key the agent connected with."""
    key = caller.context.api_key
    note = f"mcp via api key {key.name} ({key.prefix})" if key is not None else "mcp"
    return Provenance(
        author=Author.AGENT,
        note=note,
        api_key_pk=key.pk if key is not None else None,
        api_key_name=key.name if key is not None else "",
    )


@server.tool(
    name="memory_propose",
    title="Propose a memory change",
    description=(
        "Instead of rewriting memory yourself, propose a change for a person to review. kind='merge' "
        "keeps one line for duplicates (the first source's line becomes new_text, the other sources "
        "are removed); 'supersede' replaces an outdated fact (cite the old line first) by new_text; "
        "'promote' copies a durable fact from a daily note into MEMORY.md (target_path) and removes "
        "it from the note; 'retire' removes stale lines. Cite each line as {path, line} exactly as "
        "memory_get numbers it. The proposal is checked (the lines exist, the change applies, it "
        "drops at most a quarter of the entries it touches) and refused with the reason otherwise; "
        "nothing changes until a person approves it."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
)
async def memory_propose(
    ctx: Context,
    kind: Annotated[
        Literal["merge", "supersede", "promote", "retire"], Field(description="What the change does.")
    ],
    sources: Annotated[
        list[JSONObject],  # the caller's, checked by the service
        Field(
            description="The lines it rests on: [{path, line}], 1-based lines.", min_length=1, max_length=100
        ),
    ],
    assistant: AssistantArg = None,
    new_text: Annotated[
        str, Field(description="merge, supersede, promote: the text to keep or add.", max_length=20000)
    ] = "",
    target_path: Annotated[
        str, Field(description="promote only: the document to add to (MEMORY.md).", max_length=_PATH_MAX)
    ] = "",
    rationale: Annotated[str, Field(description="Why, for the reviewer.", max_length=1000)] = "",
) -> CallToolResult:
    def propose(found: Assistant, caller: McpCaller) -> Mapping[str, object]:
        data = validated(
            FileProposalInput,
            {
                "kind": kind,
                "sources": sources,
                "new_text": new_text,
                "target_path": target_path,
                "rationale": rationale,
            },
        )
        key = caller.context.api_key
        return file_proposal_payload(found, data, filed_by=f"mcp via api key {key.name}" if key else "mcp")

    return await call_tool(ctx, scope=Scope.MEMORY_WRITE, assistant=assistant, action=propose)


@server.tool(
    name="session_append",
    title="Append to a session",
    description=(
        "Record messages of your own conversation in the session named `session_key` (created on "
        "first use), all or nothing, as OpenClaw AgentMessages: {role: 'user'|'assistant'|"
        "'toolResult'|'system', content: text or a list of blocks ({type:'text',text}, "
        "{type:'toolCall',id,name,arguments}, ...), timestamp?: epoch ms}; a toolResult also needs "
        "toolCallId and toolName. The server keeps the transcript, compacts it and flushes durable "
        "notes to memory when it grows. Pass an `idempotency_key` (e.g. a hash of the batch) so a "
        "retry returns the first answer instead of appending twice."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
)
async def session_append(
    ctx: Context,
    session_key: SessionKeyArg,
    messages: Annotated[
        list[JSONObject],  # the caller's, checked by the service
        Field(
            description="The messages, oldest first.", min_length=1, max_length=settings.MAX_BATCH_MESSAGES
        ),
    ],
    assistant: AssistantArg = None,
    idempotency_key: Annotated[
        str | None,
        Field(
            description="Retrying with the same key and messages appends nothing and returns the first answer.",
            min_length=1,
            max_length=MAX_KEY_LENGTH,
        ),
    ] = None,
) -> CallToolResult:
    def append(found: Assistant, caller: McpCaller) -> Mapping[str, object]:
        payload = parse_message_payload(
            {"messages": messages},
            max_message_bytes=settings.MAX_MESSAGE_BYTES,
            max_batch=settings.MAX_BATCH_MESSAGES,
        )

        def action() -> StoredResponse:
            # One transaction: a refused append leaves no session it would have created.
            with transaction.atomic():
                session, created = session_get_or_create(assistant=found, key=session_key)
                rows = ingest_messages(session_id=session.pk, messages=payload.messages)
            body = {
                "session": {"id": session.pk, "key": session.key, "created": created},
                "messages": stored_messages_data(rows),
            }
            return StoredResponse(status=201, body=body)

        fingerprint = request_fingerprint(
            method="MCP", path=f"session_append {found.slug} {session_key}", body=messages
        )
        result = run_idempotent(
            team=caller.context.team, key=check_key(idempotency_key), fingerprint=fingerprint, action=action
        )
        return {**result.body, "replayed": result.replayed}

    return await call_tool(ctx, scope=Scope.SESSIONS_WRITE, assistant=assistant, action=append)


@server.tool(
    name="session_context",
    title="Session context",
    description=(
        "Show exactly what the assistant's model would be sent next for the session `session_key`: "
        "the system prompt, the messages after the latest compaction (with old tool results "
        "pruned), the tools, and the token figures: estimated_tokens against context_window, "
        "flush_threshold (a memory flush runs above it) and compaction_threshold (the history is "
        "summarised above it). Nothing changes."
    ),
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
async def session_context(
    ctx: Context, session_key: SessionKeyArg, assistant: AssistantArg = None
) -> CallToolResult:
    def read(found: Assistant, caller: McpCaller) -> Mapping[str, object]:
        check_scope(caller.context, CONTEXT_ALSO_NEEDS)  # it shows MEMORY.md's text too
        return context_payload(session_get_by_key(assistant=found, key=session_key))

    return await call_tool(ctx, scope=Scope.SESSIONS_READ, assistant=assistant, action=read)
