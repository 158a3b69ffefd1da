"""What the product runs on: the embedded PostgreSQL, locks, SQL built once, the ASGI handler, streaming, the log, /healthz, Markdown for reading."""
