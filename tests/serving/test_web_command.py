"""`make run` serves the ASGI application: uvicorn in development, gunicorn with uvicorn workers in production."""

from __future__ import annotations

import importlib.util

from openclaw_site.management.commands.runall import ASGI_APPLICATION, web_command


def test_development_serves_asgi_under_uvicorn() -> None:
    command = web_command("127.0.0.1:8000", debug=True)
    assert command[1:4] == ["-m", "uvicorn", ASGI_APPLICATION]
    assert command[-4:] == ["--host", "127.0.0.1", "--port", "8000"]


def test_production_serves_asgi_with_uvicorn_workers() -> None:
    command = web_command("0.0.0.0:80", debug=False)
    assert ASGI_APPLICATION == "config.asgi:application" and ASGI_APPLICATION in command
    if importlib.util.find_spec("uvicorn.workers") is not None:
        assert command[1:3] == ["-m", "gunicorn"]
        assert "uvicorn.workers.UvicornWorker" in command
    else:
        assert command[1:3] == ["-m", "uvicorn"] and "--workers" in command
