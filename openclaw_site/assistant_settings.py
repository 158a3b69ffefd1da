"""The schema of ``Assistant.settings``: OpenClaw's key names and defaults, validated.

Pure: no Django import. Keys follow OpenClaw's config (`agents.defaults.compaction`,
`...compaction.memoryFlush`, `contextPruning`, `memorySearch`; docs/openclaw-behaviour.md §1.3, §2.1, §3.1,
§4.1). A stored settings document is always complete: `validate_settings` fills the defaults, so the
context engine and search read values without fallbacks of their own.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

_NUMBER = (int, float)


@dataclass(frozen=True)
class Field:
    """One leaf of the schema: its default and what values it accepts."""

    default: Any
    kind: type | tuple[type, ...]
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None
    nullable: bool = False
    item_kind: type | None = None  # for lists


class SettingsError(ValueError):
    """A settings document has an unknown key or a bad value; ``path`` names it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


SCHEMA: dict[str, Any] = {
    "compaction": {
        "mode": Field("safeguard", str, choices=("safeguard", "default")),
        "reserveTokens": Field(16384, int, minimum=0),
        "reserveTokensFloor": Field(20000, int, minimum=0),
        "keepRecentTokens": Field(20000, int, minimum=1),
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
        "timeoutSeconds": Field(900, int, minimum=1),
        "memoryFlush": {
            "enabled": Field(True, bool),
            "softThresholdTokens": Field(4000, int, minimum=0),
            "forceFlushTranscriptBytes": Field(2 * 1024 * 1024, (int, str)),
            "prompt": Field(None, str, nullable=True),
            "systemPrompt": Field(None, str, nullable=True),
        },
    },
    "contextPruning": {
        "mode": Field("cache-ttl", str, choices=("cache-ttl", "always", "off")),
        "ttl": Field("5m", (str, int)),
        "keepLastAssistants": Field(3, int, minimum=0),
        "softTrimRatio": Field(0.3, _NUMBER, minimum=0, maximum=1),
        "hardClearRatio": Field(0.5, _NUMBER, minimum=0, maximum=1),
        "minPrunableToolChars": Field(50000, int, minimum=0),
        "softTrim": {
            "maxChars": Field(4000, int, minimum=0),
            "headChars": Field(1500, int, minimum=0),
            "tailChars": Field(1500, int, minimum=0),
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
            "overlap": Field(80, int, minimum=0),
            # Transcripts are not notes: their chunk size can differ (null: same as above).
            "sessions": {
                "tokens": Field(None, int, minimum=1, maximum=8192, nullable=True),
                "overlap": Field(None, int, minimum=0, nullable=True),
            },
        },
        "sync": {
            "watchDebounceMs": Field(1500, int, minimum=0),
            "sessions": {
                "deltaBytes": Field(100000, int, minimum=0),
                "deltaMessages": Field(50, int, minimum=0),
                "postCompactionForce": Field(True, bool),
            },
        },
        "query": {
            "maxResults": Field(6, int, minimum=1, maximum=100),
            "minScore": Field(0.35, _NUMBER, minimum=0, maximum=1),
            # What a result shows (memory_app/snippets.py): OpenClaw's first 700 characters
            # ("head"), or the best-matching lines within the budget ("best"); 0 = whole chunk.
            "snippetMaxChars": Field(700, int, minimum=0, maximum=100000),
            "snippetMode": Field("head", str, choices=("head", "best")),
            "hybrid": {
                "enabled": Field(True, bool),
                "vectorWeight": Field(0.7, _NUMBER, minimum=0, maximum=1),
                "textWeight": Field(0.3, _NUMBER, minimum=0, maximum=1),
                "candidateMultiplier": Field(4, int, minimum=1, maximum=20),
                "mmr": {
                    "enabled": Field(False, bool),
                    "lambda": Field(0.7, _NUMBER, minimum=0, maximum=1),
                },
                "temporalDecay": {
                    "enabled": Field(False, bool),
                    "halfLifeDays": Field(30, _NUMBER, minimum=1),
                },
            },
        },
        "cache": {
            "enabled": Field(True, bool),
            "maxEntries": Field(None, int, minimum=1, nullable=True),
        },
        "citations": Field("auto", str, choices=("auto", "on", "off")),
    },
}

_SOURCE_CHOICES = ("memory", "sessions")


def default_settings() -> dict[str, Any]:
    """Return a complete settings document with every default."""
    return _defaults(SCHEMA)


def _defaults(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        key: _defaults(node) if isinstance(node, dict) else copy.deepcopy(node.default)
        for key, node in schema.items()
    }


def validate_settings(data: Any, *, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """Merge ``data`` onto ``base`` (or the defaults) and return the validated, complete document."""
    merged = copy.deepcopy(base) if base is not None else default_settings()
    if data is None:
        data = {}
    _merge(SCHEMA, data, merged, path="settings")
    _check_cross_fields(merged)
    return merged


def _merge(schema: dict[str, Any], data: Any, target: dict[str, Any], *, path: str) -> None:
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
            _merge(node, value, target[key], path=key_path)
        else:
            target[key] = _check_leaf(node, value, path=key_path)


def _check_leaf(field: Field, value: Any, *, path: str) -> Any:
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


def _check_items(field: Field, value: list[Any], *, path: str) -> None:
    for index, item in enumerate(value):
        if field.item_kind is not None and not isinstance(item, field.item_kind):
            raise SettingsError(f"{path}[{index}]", f"must be {_kind_name((field.item_kind,))}")


def _kind_name(kinds: tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", list: "a list"}
    return " or ".join(dict.fromkeys(names.get(kind, kind.__name__) for kind in kinds))


def _check_cross_fields(settings: dict[str, Any]) -> None:
    for index, source in enumerate(settings["memorySearch"]["sources"]):
        if source not in _SOURCE_CHOICES:
            raise SettingsError(f"settings.memorySearch.sources[{index}]", "must be memory or sessions")
    chunking = settings["memorySearch"]["chunking"]
    if chunking["overlap"] >= chunking["tokens"]:
        raise SettingsError("settings.memorySearch.chunking.overlap", "must be less than chunking.tokens")
    sessions = chunking.get("sessions") or {}
    session_tokens = sessions.get("tokens") or chunking["tokens"]
    session_overlap = sessions.get("overlap") if sessions.get("overlap") is not None else chunking["overlap"]
    if session_overlap >= session_tokens:
        raise SettingsError(
            "settings.memorySearch.chunking.sessions.overlap", "must be less than the sessions chunk tokens"
        )
    flush_bytes = settings["compaction"]["memoryFlush"]["forceFlushTranscriptBytes"]
    if isinstance(flush_bytes, str) and parse_byte_size(flush_bytes) is None:
        raise SettingsError(
            "settings.compaction.memoryFlush.forceFlushTranscriptBytes", "must be bytes like 2097152 or '2mb'"
        )
    if isinstance(flush_bytes, int) and flush_bytes < 0:
        raise SettingsError("settings.compaction.memoryFlush.forceFlushTranscriptBytes", "must be at least 0")


_BYTE_UNITS = {"": 1, "b": 1, "kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2, "gb": 1024**3, "g": 1024**3}


def parse_byte_size(value: int | str) -> int | None:
    """Parse 2097152, "2mb" or "512kb" into bytes (OpenClaw accepts such strings); None if invalid."""
    if isinstance(value, int):
        return value if value >= 0 else None
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
    if not match or match.group(2).lower() not in _BYTE_UNITS:
        return None
    return int(float(match.group(1)) * _BYTE_UNITS[match.group(2).lower()])
