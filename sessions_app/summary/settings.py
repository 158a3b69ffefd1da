"""The safeguard summariser's settings: the `agents.defaults.compaction` knobs, defaulted and clamped.

Pure module. Reproduces the option handling of OpenClaw's compaction safeguard
(src/agents/pi-hooks/compaction-safeguard.ts: `resolveRecentTurnsPreserve`, the `maxHistoryShare`
default); docs/openclaw-behaviour.md §1.3 lists the options.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_RECENT_TURNS_PRESERVE = 3
MAX_RECENT_TURNS_PRESERVE = 12
DEFAULT_MAX_HISTORY_SHARE = 0.5


@dataclass(frozen=True)
class SummarySettings:
    """The safeguard knobs of `agents.defaults.compaction` (docs/openclaw-behaviour.md §1.3)."""

    identifier_policy: str = "strict"
    identifier_instructions: str | None = None
    custom_instructions: str | None = None
    recent_turns_preserve: int = DEFAULT_RECENT_TURNS_PRESERVE
    max_history_share: float = DEFAULT_MAX_HISTORY_SHARE

    @classmethod
    def from_config(cls, compaction: Mapping[str, Any] | None) -> SummarySettings:
        """Build settings from a `compaction` config dict, filling and clamping defaults."""
        config = compaction or {}
        policy = config.get("identifierPolicy")
        return cls(
            identifier_policy=policy if policy in ("strict", "off", "custom") else "strict",
            identifier_instructions=_optional_str(config.get("identifierInstructions")),
            custom_instructions=_optional_str(config.get("customInstructions")),
            recent_turns_preserve=_clamp_recent_turns(config.get("recentTurnsPreserve")),
            max_history_share=_history_share(config.get("maxHistoryShare")),
        )


def _optional_str(value: object) -> str | None:
    """Return value if it is a string, else None."""
    return value if isinstance(value, str) else None


def _clamp_recent_turns(value: object) -> int:
    """Clamp recentTurnsPreserve to [0, 12], default 3 (`resolveRecentTurnsPreserve`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return DEFAULT_RECENT_TURNS_PRESERVE
    return min(MAX_RECENT_TURNS_PRESERVE, max(0, math.floor(value)))


def _history_share(value: object) -> float:
    """Return maxHistoryShare if it is a number in (0, 1], else 0.5."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return DEFAULT_MAX_HISTORY_SHARE
    return float(value) if 0 < value <= 1 else DEFAULT_MAX_HISTORY_SHARE
