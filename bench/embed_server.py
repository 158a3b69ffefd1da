#!/usr/bin/env python
"""A local OpenAI-compatible embedding service: ``/v1/embeddings`` served by the bundled e5.

    .venv/bin/python bench/embed_server.py --port 8765 --processes 2

For bench/embed_burst.py (docs/benchmarks.md): ``--processes`` pre-forked processes accept on one
socket, each with its own single-threaded e5 (`providers.e5_embeddings`, nothing downloaded), and
each answers one request at a time with ``Connection: close``, so the next request goes to
whichever process is free: as a load balancer in front of several embedding servers would. The
request's ``input_type`` ("query" or "passage") picks e5's prefix. Each process keeps a count of
the texts it embedded in ``--counts-dir`` (one file per process) so the bench can tell whether
any text was embedded twice.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def serve(sock: socket.socket, counts_dir: Path | None) -> None:
    from providers.e5_embeddings import load_e5_model

    model = load_e5_model(1)
    embedded = 0
    counts = counts_dir / f"{os.getpid()}.count" if counts_dir else None

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            nonlocal embedded
            if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
                return self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else list(texts or [])
            if not texts or not all(isinstance(t, str) for t in texts):
                return self._send(
                    400, {"error": {"message": "input must be text", "type": "invalid_request_error"}}
                )
            vectors = model.encode(texts, is_query=body.get("input_type") == "query")
            embedded += len(texts)
            if counts is not None:
                counts.write_text(str(embedded))
            data = [
                {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                for i, v in enumerate(vectors)
            ]
            tokens = sum(model.token_count(t) for t in texts)
            self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", "multilingual-e5-small"),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(raw)
            self.close_connection = True

    server = HTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--counts-dir", type=Path)
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    children = []
    for _ in range(args.processes):
        pid = os.fork()
        if pid == 0:
            serve(sock, args.counts_dir)
            os._exit(0)
        children.append(pid)

    def stop(*_: Any) -> None:
        for pid in children:
            os.kill(pid, signal.SIGTERM)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
