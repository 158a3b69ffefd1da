"""The `memory_search` agent tool: OpenClaw's result JSON over `search_memory` (docs/openclaw-behaviour.md §4.10).

`memory_app.tools` lists its spec and dispatches to `memory_search`; the text returned is what
the model reads (JSON pretty-printed with two spaces, OpenClaw's `jsonResult`). Failures are
answers, never exceptions: `{results: [], disabled, unavailable, error, warning, action}`.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict, overload

from django.db import DatabaseError

from memory_app.index.status import incomplete_note
from memory_app.search.hybrid import SearchOptionError, SearchResponse, SearchResult
from memory_app.search.service import search_memory
from openclaw_site.models import Assistant
from providers.json_types import JSONObject
from providers.message_types import ToolSpec

logger = logging.getLogger(__name__)

# tools.ts: the tool slices to max(1, maxResults ?? 10) after the manager's own maxResults.
TOOL_DEFAULT_MAX_RESULTS = 10
_QUOTA_RE = re.compile(r"insufficient_quota|quota|429", re.IGNORECASE)
_KEY_TOKEN_RE = re.compile(r"[^a-z0-9]+")


class SearchHit(TypedDict):
    path: str
    startLine: int
    endLine: int
    score: float
    snippet: str
    source: str
    citation: NotRequired[str]
    corpus: NotRequired[str]  # always "memory"; set after the citation, as OpenClaw orders them


class IndexNote(TypedDict):
    state: str
    chunksWithoutVector: int
    note: str | None


class SearchDebug(TypedDict):
    backend: str
    effectiveMode: str
    searchMs: int
    hits: int


class SearchAnswer(TypedDict):
    """`memory_search`'s answer (docs/openclaw-behaviour.md §4.10)."""

    results: list[SearchHit]
    provider: str
    model: str
    citations: str
    mode: str
    fallback: NotRequired[str]
    lowConfidence: NotRequired[bool]
    index: NotRequired[IndexNote]
    debug: NotRequired[SearchDebug]  # always there; set last, as OpenClaw orders the keys


MEMORY_SEARCH_SPEC: ToolSpec = {
    "name": "memory_search",
    "description": (
        "Mandatory recall step: semantically search MEMORY.md + memory/*.md (and indexed session "
        "transcripts) before answering questions about prior work, decisions, dates, people, "
        "preferences, or todos; returns top snippets with path + lines. If response has "
        "disabled=true, memory retrieval is unavailable and should be surfaced to the user."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "maxResults": {"type": "number"},
            "minScore": {"type": "number"},
            "corpus": {"type": "string", "enum": ["memory", "wiki", "all"]},
        },
        "required": ["query"],
    },
}


def json_result(payload: Mapping[str, object]) -> str:
    """Return a tool payload as OpenClaw's `jsonResult` text."""
    return json.dumps(payload, indent=2, ensure_ascii=False)


def citations_enabled(mode: str, session_key: str | None) -> bool:
    """`memory.citations`: auto is on in direct chats, off in group or channel sessions."""
    if mode in ("on", "off"):
        return mode == "on"
    tokens = set(_KEY_TOKEN_RE.split((session_key or "").lower()))
    return not ({"group", "channel"} & tokens)


def memory_search(
    arguments: Mapping[str, object], *, assistant: Assistant, session_key: str | None = None
) -> str:
    """Run the `memory_search` tool for an assistant and return the tool-result text."""
    started = time.perf_counter()
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return json_result({"results": [], "error": "query required"})
    try:
        max_results = _number(arguments.get("maxResults"), integer=True)
        min_score = _number(arguments.get("minScore"))
    except ValueError as error:
        return json_result({"results": [], "error": str(error)})
    corpus = arguments.get("corpus") or "memory"
    if corpus not in ("memory", "wiki", "all"):
        return json_result({"results": [], "error": "corpus must be memory, wiki or all"})
    if corpus == "wiki":  # no wiki corpus here: an honest empty answer
        return json_result({"results": [], "citations": "off", "debug": _debug(started, 0, "n/a")})
    try:
        response = search_memory(
            assistant=assistant,
            query=query,
            max_results=min(100, max(1, max_results)) if max_results is not None else None,
            min_score=min(1.0, max(0.0, min_score)) if min_score is not None else None,
        )
    except (DatabaseError, SearchOptionError) as error:
        logger.warning("memory_search failed for assistant %s: %s", assistant.pk, error)
        return json_result(_unavailable(str(error), started))
    with_citations = citations_enabled(assistant.config.memory_search.citations, session_key)
    return json_result(_payload(response, with_citations, max_results, started))


@overload
def _number(value: Any, *, integer: Literal[True]) -> int | None: ...


@overload
def _number(value: Any, *, integer: Literal[False] = False) -> float | None: ...


def _number(value: Any, *, integer: bool = False) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("maxResults and minScore must be numbers")
    try:
        number = float(value)
    except ValueError:
        raise ValueError("maxResults and minScore must be numbers") from None
    if not math.isfinite(number):
        raise ValueError("maxResults and minScore must be finite numbers")
    return int(number) if integer else number


def _payload(
    response: SearchResponse, with_citations: bool, max_results: int | None, started: float
) -> SearchAnswer:
    # By score, ties in the search's own order (its better match first), not by path.
    results = sorted(response.results, key=lambda r: -r.score)
    results = results[: max(1, max_results or TOOL_DEFAULT_MAX_RESULTS)]
    items = [_hit(result, with_citations) for result in results]
    payload: SearchAnswer = {
        "results": items,
        "provider": response.provider,
        "model": response.model,
        "citations": "on" if with_citations else "off",
        "mode": response.mode,
    }
    if response.fallback:
        payload["fallback"] = response.fallback
    if response.low_confidence:
        payload["lowConfidence"] = True
    if response.index is not None:
        # How current the index was; the note tells the model when results may be incomplete
        # (docs/design.md §D15).
        payload["index"] = {
            "state": response.index.state.value,
            "chunksWithoutVector": response.index.chunks_without_vector,
            "note": incomplete_note(response.index),
        }
    payload["debug"] = _debug(started, len(items), response.mode)
    return payload


def _hit(result: SearchResult, with_citations: bool) -> SearchHit:
    hit: SearchHit = {
        "path": result.path,
        "startLine": result.start_line,
        "endLine": result.end_line,
        "score": result.score,
        "snippet": result.snippet,
        "source": result.source,
    }
    if with_citations:
        hit["snippet"] = f"{result.snippet.strip()}\n\nSource: {result.citation}"
        hit["citation"] = result.citation
    hit["corpus"] = "memory"
    return hit


def _debug(started: float, hits: int, mode: str) -> SearchDebug:
    return {
        "backend": "builtin",
        "effectiveMode": mode,
        "searchMs": round((time.perf_counter() - started) * 1000),
        "hits": hits,
    }


def _unavailable(error: str, started: float) -> JSONObject:
    """OpenClaw's failure answer; the warning tells quota problems apart (docs/openclaw-behaviour.md §4.10)."""
    quota = bool(_QUOTA_RE.search(error))
    return {
        "results": [],
        "disabled": True,
        "unavailable": True,
        "error": error,
        "warning": (
            "Memory search is unavailable because the embedding provider quota is exhausted."
            if quota
            else "Memory search is unavailable due to an embedding/provider error."
        ),
        "action": (
            "Top up or switch embedding provider, then retry memory_search."
            if quota
            else "Check embedding provider configuration and retry memory_search."
        ),
        "debug": _debug(started, 0, "n/a"),
    }
