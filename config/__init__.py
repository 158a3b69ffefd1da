"""The project's configuration: settings, URL routes and the WSGI and ASGI entry points (docs/architecture.md)."""
