#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    finally:
        release_embedded_database()


def release_embedded_database() -> None:
    """Stop the embedded PostgreSQL if this command started it and nobody else uses it.

    The settings start it on demand (openclaw_site/platform/db.py); `create_api_key` run while the server is
    down must not leave it running.
    """
    db = sys.modules.get("openclaw_site.platform.db")
    if db is None:  # the settings never needed the embedded database
        return
    from django.db import connections

    connections.close_all()
    db.release_started_databases()


if __name__ == "__main__":
    main()
