"""The schema of ``Assistant.settings``: OpenClaw's key names and defaults, validated and typed.

Pure: no Django import. Keys follow OpenClaw's config (`agents.defaults.compaction`,
`...compaction.memoryFlush`, `contextPruning`, `memorySearch`; docs/openclaw-behaviour.md §1.3,
§2.1, §3.1, §4.1). A stored settings document is always complete: `validate_settings` fills the
defaults. `parse_settings` turns a validated document into one frozen `AssistantSettings` with
snake_case fields and converted units; the pure modules take that object (or the part of it they
need) and never read the JSON, so the defaults and bounds in `SCHEMA` are the only ones.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import TypeAlias, cast

from openclaw_site.teams.settings_document import (
    CitationsMode,
    CompactionDocument,
    CompactionMode,
    ContextPruningDocument,
    IdentifierPolicy,
    MemorySearchDocument,
    PruningMode,
    QueryDocument,
    SettingsDocument,
    SnippetMode,
)
from providers.json_types import JSONObject

_NUMBER = (int, float)
# The largest context window an assistant may have, and so the largest any token setting may be.
MAX_TOKENS = 100_000_000
MAX_BYTES = 10**12


@dataclass(frozen=True)
class Field:
    """One leaf of the schema: its default and what values it accepts."""

    default: object
    kind: type | tuple[type, ...]
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[object, ...] | None = None
    nullable: bool = False
    item_kind: type | None = None  # for lists


class SettingsError(ValueError):
    """A settings document has an unknown key or a bad value; ``path`` names it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


# A section of the schema: its keys, each a leaf or a section of its own.
SchemaNode: TypeAlias = "dict[str, Field | SchemaNode]"

SCHEMA: SchemaNode = {
    "compaction": {
        "mode": Field("safeguard", str, choices=("safeguard", "default")),
        "reserveTokens": Field(16384, int, minimum=0, maximum=MAX_TOKENS),
        "reserveTokensFloor": Field(20000, int, minimum=0, maximum=MAX_TOKENS),
        "keepRecentTokens": Field(20000, int, minimum=1, maximum=MAX_TOKENS),
        "maxHistoryShare": Field(0.5, _NUMBER, minimum=0.1, maximum=0.9),
        "recentTurnsPreserve": Field(3, int, minimum=0, maximum=12),
        "identifierPolicy": Field("strict", str, choices=("strict", "off", "custom")),
        "identifierInstructions": Field(None, str, nullable=True),
        "customInstructions": Field(None, str, nullable=True),
        "qualityGuard": {
            "enabled": Field(False, bool),
            "maxRetries": Field(1, int, minimum=0, maximum=3),
        },
        "model": Field(None, str, nullable=True),
        "timeoutSeconds": Field(900, int, minimum=1, maximum=86400),
        "memoryFlush": {
            "enabled": Field(True, bool),
            "softThresholdTokens": Field(4000, int, minimum=0, maximum=MAX_TOKENS),
            "forceFlushTranscriptBytes": Field(2 * 1024 * 1024, (int, str)),
            "prompt": Field(None, str, nullable=True),
            "systemPrompt": Field(None, str, nullable=True),
        },
    },
    "contextPruning": {
        "mode": Field("cache-ttl", str, choices=("cache-ttl", "always", "off")),
        # A duration string ("5m", "30s"; a bare number means minutes) or an integer of ms.
        "ttl": Field("5m", (str, int), minimum=0),
        "keepLastAssistants": Field(3, int, minimum=0, maximum=10000),
        "softTrimRatio": Field(0.3, _NUMBER, minimum=0, maximum=1),
        "hardClearRatio": Field(0.5, _NUMBER, minimum=0, maximum=1),
        "minPrunableToolChars": Field(50000, int, minimum=0, maximum=MAX_BYTES),
        "softTrim": {
            "maxChars": Field(4000, int, minimum=0, maximum=MAX_BYTES),
            "headChars": Field(1500, int, minimum=0, maximum=MAX_BYTES),
            "tailChars": Field(1500, int, minimum=0, maximum=MAX_BYTES),
        },
        "hardClear": {
            "enabled": Field(True, bool),
            "placeholder": Field("[Old tool result content cleared]", str),
        },
        "tools": {
            "allow": Field([], list, item_kind=str),
            "deny": Field([], list, item_kind=str),
        },
    },
    "memorySearch": {
        "enabled": Field(True, bool),
        "sources": Field(["memory", "sessions"], list, item_kind=str),
        "chunking": {
            "tokens": Field(400, int, minimum=1, maximum=8192),
            "overlap": Field(80, int, minimum=0, maximum=8191),
            # Transcripts are not notes: their chunk size differs (null: same as above). A few
            # messages per chunk read best on LoCoMo dev (README, Evaluation): with 400-token
            # chunks the 700-character snippets hide most of each chunk.
            "sessions": {
                "tokens": Field(128, int, minimum=1, maximum=8192, nullable=True),
                "overlap": Field(25, int, minimum=0, maximum=8191, nullable=True),
            },
        },
        "sync": {
            "watchDebounceMs": Field(1500, int, minimum=0, maximum=3_600_000),
            "sessions": {
                "deltaBytes": Field(100000, int, minimum=0, maximum=MAX_BYTES),
                "deltaMessages": Field(50, int, minimum=0, maximum=10**6),
                "postCompactionForce": Field(True, bool),
            },
        },
        "query": {
            "maxResults": Field(6, int, minimum=1, maximum=100),
            "minScore": Field(0.35, _NUMBER, minimum=0, maximum=1),
            # What a result shows (memory_app/search/snippets.py): OpenClaw's first 700 characters
            # ("head"), or the best-matching lines within the budget ("best"); 0 = whole chunk.
            "snippetMaxChars": Field(700, int, minimum=0, maximum=100000),
            "snippetMode": Field("head", str, choices=("head", "best")),
            "hybrid": {
                "enabled": Field(True, bool),
                "vectorWeight": Field(0.7, _NUMBER, minimum=0, maximum=1),
                "textWeight": Field(0.3, _NUMBER, minimum=0, maximum=1),
                "candidateMultiplier": Field(4, int, minimum=1, maximum=20),
                # Not OpenClaw's: the text weight of a query written in CJK is scaled by this
                # (its terms are character bigrams, a weaker keyword signal than words;
                # memory_app/search/ranking.py `query_weights`). 1 = the same weights for every script.
                "cjkTextWeightScale": Field(0.15, _NUMBER, minimum=0, maximum=1),
                "mmr": {
                    "enabled": Field(False, bool),
                    "lambda": Field(0.7, _NUMBER, minimum=0, maximum=1),
                },
                "temporalDecay": {
                    "enabled": Field(False, bool),
                    "halfLifeDays": Field(30, _NUMBER, minimum=1, maximum=36500),
                },
            },
        },
        "cache": {
            "enabled": Field(True, bool),
            "maxEntries": Field(None, int, minimum=1, maximum=10**9, nullable=True),
        },
        "citations": Field("auto", str, choices=("auto", "on", "off")),
    },
    # Not OpenClaw's: when the consolidation job runs by itself (docs/design.md, Provenance,
    # consolidation and forgetting): nightly at this hour of the assistant's timezone, or never.
    "memoryConsolidation": {
        "schedule": Field("nightly", str, choices=("nightly", "off")),
        "hour": Field(3, int, minimum=0, maximum=23),
        # The kinds of proposal the job applies without a review (none by default); never one
        # resting on an untrusted line.
        "autoApply": Field([], list, item_kind=str),
    },
}

_SOURCE_CHOICES = ("memory", "sessions")
_PROPOSAL_KINDS = ("merge", "supersede", "promote", "retire")


def default_settings() -> SettingsDocument:
    """Return a complete settings document with every default."""
    # SettingsDocument is SCHEMA's shape, so its defaults make one.
    return cast(SettingsDocument, _defaults(SCHEMA))


def _defaults(schema: SchemaNode) -> JSONObject:
    return {
        key: _defaults(node) if isinstance(node, dict) else copy.deepcopy(node.default)
        for key, node in schema.items()
    }


def validate_settings(data: object, *, base: SettingsDocument | None = None) -> SettingsDocument:
    """Merge ``data`` onto ``base`` (or the defaults) and return the validated, complete document."""
    merged: JSONObject = copy.deepcopy(dict(base)) if base is not None else _defaults(SCHEMA)
    if data is None:
        data = {}
    _merge(SCHEMA, data, merged, path="settings")
    # Complete (base or the defaults) and each leaf checked against its Field: SCHEMA's shape.
    checked = cast(SettingsDocument, merged)
    _check_cross_fields(checked)
    return checked


def _merge(schema: SchemaNode, data: object, target: JSONObject, *, path: str) -> None:
    if not isinstance(data, dict):
        raise SettingsError(path, "must be an object")
    for key, value in data.items():
        key_path = f"{path}.{key}"
        if key not in schema:
            known = ", ".join(sorted(schema))
            raise SettingsError(key_path, f"unknown key (known keys: {known})")
        node = schema[key]
        if isinstance(node, dict):
            target.setdefault(key, _defaults(node))
            _merge(node, value, cast(JSONObject, target[key]), path=key_path)
        else:
            target[key] = _check_leaf(node, value, path=key_path)


def _check_leaf(field: Field, value: object, *, path: str) -> object:
    if value is None:
        if field.nullable:
            return None
        raise SettingsError(path, "must not be null")
    kinds = field.kind if isinstance(field.kind, tuple) else (field.kind,)
    # bool is a subclass of int: a boolean where a number is expected is a type error.
    if isinstance(value, bool) and bool not in kinds:
        raise SettingsError(path, f"must be {_kind_name(kinds)}, not a boolean")
    if not isinstance(value, kinds):
        raise SettingsError(path, f"must be {_kind_name(kinds)}")
    if field.choices is not None and value not in field.choices:
        raise SettingsError(path, f"must be one of: {', '.join(map(str, field.choices))}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_range(field, value, path=path)
    if isinstance(value, list):
        _check_items(field, value, path=path)
    return copy.deepcopy(value)


def _check_range(field: Field, value: float, *, path: str) -> None:
    if field.minimum is not None and value < field.minimum:
        raise SettingsError(path, f"must be at least {field.minimum:g}")
    if field.maximum is not None and value > field.maximum:
        raise SettingsError(path, f"must be at most {field.maximum:g}")


def _check_items(field: Field, value: list[object], *, path: str) -> None:
    for index, item in enumerate(value):
        if field.item_kind is not None and not isinstance(item, field.item_kind):
            raise SettingsError(f"{path}[{index}]", f"must be {_kind_name((field.item_kind,))}")


def _kind_name(kinds: tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", list: "a list"}
    return " or ".join(dict.fromkeys(names.get(kind, kind.__name__) for kind in kinds))


def _check_cross_fields(settings: SettingsDocument) -> None:
    for index, kind in enumerate(settings["memoryConsolidation"]["autoApply"]):
        if kind not in _PROPOSAL_KINDS:
            raise SettingsError(
                f"settings.memoryConsolidation.autoApply[{index}]",
                f"must be one of: {', '.join(_PROPOSAL_KINDS)}",
            )
    for index, source in enumerate(settings["memorySearch"]["sources"]):
        if source not in _SOURCE_CHOICES:
            raise SettingsError(f"settings.memorySearch.sources[{index}]", "must be memory or sessions")
    chunking = settings["memorySearch"]["chunking"]
    if chunking["overlap"] >= chunking["tokens"]:
        raise SettingsError("settings.memorySearch.chunking.overlap", "must be less than chunking.tokens")
    sessions = chunking.get("sessions") or {}
    session_tokens = sessions.get("tokens") or chunking["tokens"]
    given_overlap = sessions.get("overlap")
    session_overlap = given_overlap if given_overlap is not None else chunking["overlap"]
    if session_overlap >= session_tokens:
        raise SettingsError(
            "settings.memorySearch.chunking.sessions.overlap", "must be less than the sessions chunk tokens"
        )
    flush_bytes = settings["compaction"]["memoryFlush"]["forceFlushTranscriptBytes"]
    if isinstance(flush_bytes, str) and parse_byte_size(flush_bytes) is None:
        raise SettingsError(
            "settings.compaction.memoryFlush.forceFlushTranscriptBytes", "must be bytes like 2097152 or '2mb'"
        )
    size = parse_byte_size(flush_bytes)
    if size is None or size > MAX_BYTES:
        raise SettingsError(
            "settings.compaction.memoryFlush.forceFlushTranscriptBytes",
            f"must be between 0 and {MAX_BYTES} bytes",
        )
    _check_pruning(settings["contextPruning"])


def check_fits_window(settings: SettingsDocument, *, context_window: int) -> None:
    """Refuse token settings that leave no room in ``context_window`` (docs/design.md, Limits and refusals).

    The flush and compaction thresholds are ``window - R - softThresholdTokens`` and ``window - R``
    with ``R = max(reserveTokens, reserveTokensFloor)``: both must stay above zero, or the session
    would never flush or compact. The recent tail kept verbatim must fit below the compaction
    threshold, or a compaction would keep everything.
    """
    compaction = settings["compaction"]
    reserve, floor = compaction["reserveTokens"], compaction["reserveTokensFloor"]
    soft = compaction["memoryFlush"]["softThresholdTokens"]
    if max(reserve, floor) + soft >= context_window:
        name = "reserveTokens" if reserve >= floor else "reserveTokensFloor"
        raise SettingsError(
            f"settings.compaction.{name}",
            f"the reserve ({max(reserve, floor)}) plus memoryFlush.softThresholdTokens ({soft}) must be less "
            f"than the context window ({context_window}); otherwise no flush or compaction threshold is left",
        )
    room = context_window - max(reserve, floor)
    if compaction["keepRecentTokens"] >= room:
        raise SettingsError(
            "settings.compaction.keepRecentTokens",
            f"must be less than the context window ({context_window}) minus the reserve "
            f"({max(reserve, floor)}), or a compaction could summarise nothing",
        )


def smallest_window(settings: SettingsDocument) -> int:
    """Return the smallest context window ``settings`` fit in (what `check_fits_window` accepts)."""
    compaction = settings["compaction"]
    reserve = int(max(compaction["reserveTokens"], compaction["reserveTokensFloor"]))
    room = int(max(compaction["memoryFlush"]["softThresholdTokens"], compaction["keepRecentTokens"]))
    return reserve + room + 1


def _check_pruning(pruning: ContextPruningDocument) -> None:
    ttl = pruning["ttl"]
    if isinstance(ttl, str):
        try:
            parse_duration_ms(ttl, default_unit="m")
        except ValueError:
            raise SettingsError(
                "settings.contextPruning.ttl", "must be a duration like '5m', '30s' or '1h', or ms"
            ) from None
    if not pruning["hardClear"]["placeholder"].strip():
        raise SettingsError("settings.contextPruning.hardClear.placeholder", "must not be blank")


_BYTE_UNITS = {"": 1, "b": 1, "kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2, "gb": 1024**3, "g": 1024**3}


def parse_byte_size(value: int | str) -> int | None:
    """Parse 2097152, "2mb" or "512kb" into bytes (OpenClaw accepts such strings); None if invalid."""
    if isinstance(value, int):
        return value if value >= 0 else None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
    if not match or match.group(2).lower() not in _BYTE_UNITS:
        return None
    return int(float(match.group(1)) * _BYTE_UNITS[match.group(2).lower()])


_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(raw: str, *, default_unit: str = "ms") -> int:
    """Parse "30s", "5m", "1h", "2d", "250ms" or a bare number in default_unit into ms."""
    text = str(raw).strip().lower()
    match = _DURATION_RE.match(text)
    if match is None:
        raise ValueError(f"invalid duration: {raw!r}")
    value = float(match.group(1))
    product = value * _UNIT_MS[match.group(2) or default_unit]
    # OpenClaw's duration parser refuses values that round to nothing, e.g. "0.0000001ms".
    if product == 0 and value != 0:
        raise ValueError(f"duration too small: {raw!r}")
    # Rounded like JavaScript's Math.round (half up), not Python's banker's rounding.
    return math.floor(product + 0.5)


# --- the typed settings object -----------------------------------------------------------------

# The Literal types of the modes (CompactionMode, ...) are in settings_document, beside the document.


@dataclass(frozen=True)
class SummarySettings:
    """The safeguard summariser's knobs of `compaction` (docs/openclaw-behaviour.md §1.3)."""

    identifier_policy: IdentifierPolicy
    identifier_instructions: str | None
    custom_instructions: str | None
    recent_turns_preserve: int
    max_history_share: float


@dataclass(frozen=True)
class QualityGuardSettings:
    """`compaction.qualityGuard`: audit each summary and retry up to `max_retries` times."""

    enabled: bool
    max_retries: int


@dataclass(frozen=True)
class MemoryFlushSettings:
    """`compaction.memoryFlush` (docs/openclaw-behaviour.md §2.1); the force size in bytes."""

    enabled: bool
    soft_threshold_tokens: int
    force_flush_transcript_bytes: int
    prompt: str | None
    system_prompt: str | None


@dataclass(frozen=True)
class CompactionSettings:
    """`compaction`, with the summariser's knobs in `summary` and the flush in `memory_flush`."""

    mode: CompactionMode
    reserve_tokens: int
    reserve_tokens_floor: int
    keep_recent_tokens: int
    model: str | None
    timeout_seconds: int
    quality_guard: QualityGuardSettings
    memory_flush: MemoryFlushSettings
    summary: SummarySettings


@dataclass(frozen=True)
class SoftTrim:
    """Soft-trim limits, in raw (UTF-16) chars of the joined tool-result text."""

    max_chars: int
    head_chars: int
    tail_chars: int


@dataclass(frozen=True)
class HardClear:
    """Whether old tool results may be replaced whole, and by what (stripped, never blank)."""

    enabled: bool
    placeholder: str


@dataclass(frozen=True)
class ToolMatch:
    """Case-insensitive `*` globs naming prunable tools; deny wins, a non-empty allow restricts."""

    allow: tuple[str, ...]
    deny: tuple[str, ...]


@dataclass(frozen=True)
class PruningSettings:
    """`contextPruning` (docs/openclaw-behaviour.md §3.1), the TTL in milliseconds."""

    mode: PruningMode
    ttl_ms: int
    keep_last_assistants: int
    soft_trim_ratio: float
    hard_clear_ratio: float
    min_prunable_tool_chars: int
    soft_trim: SoftTrim
    hard_clear: HardClear
    tools: ToolMatch


@dataclass(frozen=True)
class ChunkingSettings:
    """A chunk size in tokens and the overlap between neighbouring chunks (less than the size)."""

    tokens: int
    overlap: int


@dataclass(frozen=True)
class SessionSyncSettings:
    """`memorySearch.sync.sessions`: how much a transcript grows before it is re-indexed."""

    delta_bytes: int
    delta_messages: int
    post_compaction_force: bool


@dataclass(frozen=True)
class SyncSettings:
    """`memorySearch.sync`."""

    watch_debounce_ms: int
    sessions: SessionSyncSettings


@dataclass(frozen=True)
class MmrSettings:
    """`memorySearch.query.hybrid.mmr` (`lambda` is a Python keyword: `lambda_`)."""

    enabled: bool
    lambda_: float


@dataclass(frozen=True)
class TemporalDecaySettings:
    """`memorySearch.query.hybrid.temporalDecay`."""

    enabled: bool
    half_life_days: float


@dataclass(frozen=True)
class HybridSettings:
    """`memorySearch.query.hybrid`."""

    enabled: bool
    vector_weight: float
    text_weight: float
    candidate_multiplier: int
    cjk_text_weight_scale: float
    mmr: MmrSettings
    temporal_decay: TemporalDecaySettings


@dataclass(frozen=True)
class QuerySettings:
    """`memorySearch.query`."""

    max_results: int
    min_score: float
    snippet_max_chars: int
    snippet_mode: SnippetMode
    hybrid: HybridSettings


@dataclass(frozen=True)
class EmbeddingCacheSettings:
    """`memorySearch.cache`."""

    enabled: bool
    max_entries: int | None


@dataclass(frozen=True)
class MemorySearchSettings:
    """`memorySearch` (docs/openclaw-behaviour.md §4.1).

    `session_chunking` is `chunking.sessions` resolved: a null size or overlap there means the
    notes' value.
    """

    enabled: bool
    sources: tuple[str, ...]
    chunking: ChunkingSettings
    session_chunking: ChunkingSettings
    sync: SyncSettings
    query: QuerySettings
    cache: EmbeddingCacheSettings
    citations: CitationsMode


@dataclass(frozen=True)
class ConsolidationSettings:
    """`memoryConsolidation`: whether the consolidation job runs nightly, and at which local hour."""

    schedule: str = "nightly"
    hour: int = 3
    auto_apply: tuple[str, ...] = ()


@dataclass(frozen=True)
class AssistantSettings:
    """One assistant's settings, typed: what every module below the adapters reads."""

    compaction: CompactionSettings
    pruning: PruningSettings
    memory_search: MemorySearchSettings
    consolidation: ConsolidationSettings = ConsolidationSettings()


def parse_settings(document: object) -> AssistantSettings:
    """Validate a settings document (defaults filled) and return it as `AssistantSettings`.

    Raises `SettingsError` as `validate_settings` does; nothing here defaults or clamps a value.
    """
    checked = validate_settings(document)
    return AssistantSettings(
        compaction=_compaction(checked["compaction"]),
        pruning=_pruning(checked["contextPruning"]),
        memory_search=_memory_search(checked["memorySearch"]),
        consolidation=ConsolidationSettings(
            schedule=checked["memoryConsolidation"]["schedule"],
            hour=checked["memoryConsolidation"]["hour"],
            auto_apply=tuple(checked["memoryConsolidation"]["autoApply"]),
        ),
    )


def _compaction(doc: CompactionDocument) -> CompactionSettings:
    flush, guard = doc["memoryFlush"], doc["qualityGuard"]
    force_bytes = parse_byte_size(flush["forceFlushTranscriptBytes"])
    assert force_bytes is not None  # validate_settings refuses a size it cannot read
    return CompactionSettings(
        mode=doc["mode"],
        reserve_tokens=doc["reserveTokens"],
        reserve_tokens_floor=doc["reserveTokensFloor"],
        keep_recent_tokens=doc["keepRecentTokens"],
        model=doc["model"],
        timeout_seconds=doc["timeoutSeconds"],
        quality_guard=QualityGuardSettings(enabled=guard["enabled"], max_retries=guard["maxRetries"]),
        memory_flush=MemoryFlushSettings(
            enabled=flush["enabled"],
            soft_threshold_tokens=flush["softThresholdTokens"],
            force_flush_transcript_bytes=force_bytes,
            prompt=flush["prompt"],
            system_prompt=flush["systemPrompt"],
        ),
        summary=SummarySettings(
            identifier_policy=doc["identifierPolicy"],
            identifier_instructions=doc["identifierInstructions"],
            custom_instructions=doc["customInstructions"],
            recent_turns_preserve=doc["recentTurnsPreserve"],
            max_history_share=float(doc["maxHistoryShare"]),
        ),
    )


def _pruning(doc: ContextPruningDocument) -> PruningSettings:
    ttl = doc["ttl"]
    soft, hard = doc["softTrim"], doc["hardClear"]
    return PruningSettings(
        mode=doc["mode"],
        # docs/openclaw-behaviour.md §3.1: a string's bare number is minutes, an integer is ms.
        ttl_ms=parse_duration_ms(ttl, default_unit="m") if isinstance(ttl, str) else ttl,
        keep_last_assistants=doc["keepLastAssistants"],
        soft_trim_ratio=float(doc["softTrimRatio"]),
        hard_clear_ratio=float(doc["hardClearRatio"]),
        min_prunable_tool_chars=doc["minPrunableToolChars"],
        soft_trim=SoftTrim(
            max_chars=soft["maxChars"], head_chars=soft["headChars"], tail_chars=soft["tailChars"]
        ),
        hard_clear=HardClear(enabled=hard["enabled"], placeholder=hard["placeholder"].strip()),
        tools=ToolMatch(allow=tuple(doc["tools"]["allow"]), deny=tuple(doc["tools"]["deny"])),
    )


def _memory_search(doc: MemorySearchDocument) -> MemorySearchSettings:
    chunking, sessions = doc["chunking"], doc["chunking"]["sessions"]
    sync, query, cache = doc["sync"], doc["query"], doc["cache"]
    return MemorySearchSettings(
        enabled=doc["enabled"],
        sources=tuple(doc["sources"]),
        chunking=ChunkingSettings(tokens=chunking["tokens"], overlap=chunking["overlap"]),
        session_chunking=ChunkingSettings(
            tokens=chunking["tokens"] if sessions["tokens"] is None else sessions["tokens"],
            overlap=chunking["overlap"] if sessions["overlap"] is None else sessions["overlap"],
        ),
        sync=SyncSettings(
            watch_debounce_ms=sync["watchDebounceMs"],
            sessions=SessionSyncSettings(
                delta_bytes=sync["sessions"]["deltaBytes"],
                delta_messages=sync["sessions"]["deltaMessages"],
                post_compaction_force=sync["sessions"]["postCompactionForce"],
            ),
        ),
        query=_query(query),
        cache=EmbeddingCacheSettings(enabled=cache["enabled"], max_entries=cache["maxEntries"]),
        citations=doc["citations"],
    )


def _query(doc: QueryDocument) -> QuerySettings:
    hybrid = doc["hybrid"]
    return QuerySettings(
        max_results=doc["maxResults"],
        min_score=float(doc["minScore"]),
        snippet_max_chars=doc["snippetMaxChars"],
        snippet_mode=doc["snippetMode"],
        hybrid=HybridSettings(
            enabled=hybrid["enabled"],
            vector_weight=float(hybrid["vectorWeight"]),
            text_weight=float(hybrid["textWeight"]),
            candidate_multiplier=hybrid["candidateMultiplier"],
            cjk_text_weight_scale=float(hybrid["cjkTextWeightScale"]),
            mmr=MmrSettings(enabled=hybrid["mmr"]["enabled"], lambda_=float(hybrid["mmr"]["lambda"])),
            temporal_decay=TemporalDecaySettings(
                enabled=hybrid["temporalDecay"]["enabled"],
                half_life_days=float(hybrid["temporalDecay"]["halfLifeDays"]),
            ),
        ),
    )
