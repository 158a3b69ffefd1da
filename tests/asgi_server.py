"""The project's ASGI application served by uvicorn on 127.0.0.1, in a thread, on the test database.

Django's `live_server` fixture serves WSGI; what production runs (`config.asgi`, under
uvicorn) is tested through `asgi_live_server`, which yields the server's base URL. The test
database is the one pytest-django set up, so tests that use it see committed data only: they run
with `transactional_db` (the fixture asks for it).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

STARTUP_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class AsgiServer:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _close_server_connections() -> None:
    """End the database sessions the server's threads opened, so the test database can be reset."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture
def asgi_live_server(transactional_db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[AsgiServer]:
    import uvicorn

    from config.asgi import application
    from openclaw_site.platform import asgi_handler as asgi_django

    # Request threads of this server's own: their connections end with them, so the next test
    # (which may switch the connection pool on or off) finds none left over from this one.
    requests = asgi_django.request_executor()
    monkeypatch.setattr(asgi_django, "REQUEST_EXECUTOR", requests)

    server_address = AsgiServer("127.0.0.1", _free_port())
    config = uvicorn.Config(
        application, host=server_address.host, port=server_address.port, log_level="warning", lifespan="auto"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve()), name="asgi-live-server", daemon=True
    )
    thread.start()
    started = threading.Event()
    for _ in range(STARTUP_TIMEOUT_SECONDS * 20):
        if server.started:
            started.set()
            break
        if not thread.is_alive():
            break
        started.wait(0.05)
    if not started.is_set():
        server.should_exit = True
        pytest.fail(f"uvicorn did not start on {server_address.url}")
    try:
        yield server_address
    finally:
        server.should_exit = True
        thread.join(timeout=STARTUP_TIMEOUT_SECONDS)
        requests.shutdown(wait=True)
        _close_server_connections()
