"""How an agent connects to one assistant, as the API keys page shows it (docs/dashboard.md, API keys).

The addresses are those of docs/integrations.md: the MCP endpoint at ``/mcp/<slug>/``
(`integrations/mcp_http.py`), the OpenAI-compatible endpoint at ``/v1`` (`integrations/openai_urls.py`,
the slug as the model), and the OpenClaw plugin of `integrations/openclaw/`. This layer may not import
`integrations` (docs/architecture.md, Layers); tests/test_views_first_hour.py checks that these paths
are the ones served.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MCP_PATH = "/mcp/{slug}/"
OPENAI_BASE_PATH = "/v1"
# The scopes the OpenClaw plugin's calls need (docs/integrations.md, OpenClaw plugin).
OPENCLAW_PLUGIN_SCOPES = ("sessions:write", "memory:read", "memory:write")
OPENCLAW_KEY_VARIABLE = "OPENCLAW_SITE_API_KEY"
CONFIG_KEY = "plugins.entries.openclaw-site.config"


@dataclass(frozen=True)
class OpenClawPlugin:
    """The commands and settings that give OpenClaw this site as its memory and sessions."""

    install: str
    config_key: str
    config: str
    key_variable: str = OPENCLAW_KEY_VARIABLE
    scopes: tuple[str, ...] = OPENCLAW_PLUGIN_SCOPES


@dataclass(frozen=True)
class Connection:
    """Where an agent reaches one assistant."""

    slug: str
    base_url: str
    mcp_url: str
    openai_base_url: str
    openclaw: OpenClawPlugin


def connection(*, base_url: str, slug: str) -> Connection:
    """Return the addresses and the OpenClaw settings for the assistant ``slug`` of this site."""
    base = base_url.rstrip("/")
    return Connection(
        slug=slug,
        base_url=base,
        mcp_url=base + MCP_PATH.format(slug=slug),
        openai_base_url=base + OPENAI_BASE_PATH,
        openclaw=openclaw_plugin(base_url=base, slug=slug),
    )


def openclaw_plugin(*, base_url: str, slug: str) -> OpenClawPlugin:
    """Return the plugin's install command and the commands that configure and enable it (the
    Install block of docs/integrations.md, for this site and assistant)."""
    config = json.dumps({"baseUrl": base_url, "assistant": slug})
    configure = (
        f"openclaw config set {CONFIG_KEY} '{config}' --strict-json",
        "openclaw plugins enable openclaw-site --accept-capabilities",
        "openclaw config set plugins.entries.memory-core.enabled false",
        f"export {OPENCLAW_KEY_VARIABLE}=<a key with {', '.join(OPENCLAW_PLUGIN_SCOPES)}>",
    )
    return OpenClawPlugin(
        install=(
            "openclaw plugins install -l /path/to/openclaw-site/integrations/openclaw "
            "--force --accept-capabilities"
        ),
        config_key=CONFIG_KEY,
        config="\n".join(configure),
    )
