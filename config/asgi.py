"""ASGI entry point: the MCP endpoint under /mcp/ (integrations.mcp_http), Django for everything else.

Django runs each request in one thread hop (openclaw_site/platform/asgi_handler.py).

The ASGI lifespan goes to the MCP app, whose session manager runs for it; Django has none.
The process hands the interpreter lock on every millisecond instead of every 5 (docs/design.md,
Search latency): requests and open streams run in threads of one process, and a short request
(a search, /healthz) waits for the lock after each database round trip while streams work.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import django
from starlette.types import Receive

# Python's default is 0.005 s; a search's ~8 round trips each wait up to this long for the lock.
SWITCH_INTERVAL_SECONDS = 0.001
sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)

# Imported once Django is set up: the handler reads the settings, the MCP tools import the models.
from integrations.mcp_http import is_mcp_path, mcp_application  # noqa: E402
from openclaw_site.platform.asgi_handler import ThreadedASGIHandler  # noqa: E402
from providers.embeddings import preload_embedder  # noqa: E402

django_application = ThreadedASGIHandler()

# The first search must not wait for the model: load it now, in the background (/healthz says when).
preload_embedder()


async def application(scope: dict[str, Any], receive: Receive, send: Callable[..., Awaitable[None]]) -> None:
    """Route a connection: lifespan and /mcp/ to the MCP app, the rest to Django."""
    if scope["type"] == "lifespan" or (scope["type"] == "http" and is_mcp_path(scope["path"])):
        await mcp_application(scope, receive, send)
    else:
        await django_application(scope, receive, send)
