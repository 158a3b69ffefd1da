"""When an agent's memory write counts as ``untrusted`` (pure; docs/design.md, Provenance, consolidation and forgetting).

Text an agent writes is ``agent`` trust, unless what it read just before came from outside the
team: a tool result of a tool that fetches outside content (a web page, a search, a browser, a
file read). The rule looks at the tool results the writer could see: for the memory flush, the
messages of the context the flush turn is sent; for a tool write that names its session (the
OpenClaw plugin's ``memory_write``), the latest `RECENT_MESSAGES` messages of that session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# OpenClaw's tools that bring outside text into a conversation, and the usual MCP names for them.
FETCHING_TOOLS = frozenset(
    {"web_fetch", "web_search", "browser", "read", "fetch", "http_request", "url_fetch", "read_file"}
)
# How far back a tool write looks for a fetching tool's result in its session.
RECENT_MESSAGES = 50


def fetching_tools_seen(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The fetching tools whose results appear among ``messages`` (AgentMessage dicts), in order."""
    seen: list[str] = []
    for message in messages:
        if message.get("role") != "toolResult":
            continue
        name = str(message.get("toolName") or message.get("tool_name") or "")
        if name in FETCHING_TOOLS and name not in seen:
            seen.append(name)
    return seen
