"""``agentrag view --serve``: the page on 127.0.0.1 for large runs. The page holds only the table;
each record is fetched (whole, no text limit) from ``/detail/<row>`` when it is opened."""

from __future__ import annotations

import json
import logging
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentrag.errors import UserError
from agentrag.report.viewer.build import build_payload
from agentrag.report.viewer.common import Payload
from agentrag.report.viewer.page import render_page

log = logging.getLogger(__name__)

HOST = "127.0.0.1"


def _detail(p: Payload, row: int) -> dict[str, Any]:
    """The record of ``row`` with only the documents it references (renumbered)."""
    d = p.details[row]
    used: dict[int, int] = {}

    def remap(obj: Any) -> Any:  # hits are [doc index, score, mark]; node docs are [doc index, score]
        if isinstance(obj, dict):
            return {k: ([[used.setdefault(h[0], len(used)), *h[1:]] for h in v] if k in ("hits", "docs")
                        and isinstance(v, list) and all(isinstance(h, list) for h in v) else remap(v))
                    for k, v in obj.items()}
        if isinstance(obj, list):
            return [remap(x) for x in obj]
        return obj

    out = remap(d)
    docs = p.docs.rows
    return {"d": out, "docs": [docs[i] for i, _ in sorted(used.items(), key=lambda kv: kv[1])]}


class ViewerServer(ThreadingHTTPServer):
    """Serves one run's page; ``url`` is where it listens."""

    daemon_threads = True

    def __init__(self, payload: Payload, port: int = 0) -> None:
        self.payload = payload
        self.page = render_page(payload, detail_url="detail/").encode("utf-8")
        self._lock = threading.Lock()
        try:
            super().__init__((HOST, port), _Handler)
        except OSError as exc:
            raise UserError(f"cannot listen on {HOST}:{port} ({exc.strerror}); pick another --port") from exc

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug(fmt, *args)

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            self._send(200, self.server.page, "text/html; charset=utf-8")
            return
        if path.startswith("/detail/") and path[8:].isdigit() and int(path[8:]) < len(self.server.payload.details):
            body = json.dumps(_detail(self.server.payload, int(path[8:])), ensure_ascii=False).encode("utf-8")
            self._send(200, body, "application/json; charset=utf-8")
            return
        self._send(404, b"not found", "text/plain; charset=utf-8")


def make_server(run_dir: str | os.PathLike[str], port: int = 0) -> ViewerServer:
    """A server for the run in ``run_dir`` on 127.0.0.1 (``port`` 0: a free one); call
    ``serve_forever()`` on it, ``shutdown()`` from another thread to stop it."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be in 0..65535, got {port!r}")
    return ViewerServer(build_payload(run_dir, text_chars=None), port)


__all__ = ["make_server", "ViewerServer", "HOST"]
