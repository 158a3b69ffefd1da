"""WSGI entry point."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from providers.embeddings import preload_embedder  # noqa: E402  (needs the app registry)

# The first search must not wait for the model: load it now, in the background (/healthz says when).
preload_embedder()
