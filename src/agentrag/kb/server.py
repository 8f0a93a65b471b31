"""A Search-R1-compatible retrieval server over a knowledge base (FastAPI).

``POST /retrieve`` takes a batch ``{"queries": [...], "topk"|"top_k": k, "return_scores": bool}``
and answers ``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}``, or one query
``{"query": "...", "topk"|"top_k": k}`` answered ``{"result": [[hit]], "results": [hit]}`` with
each hit under every field name a client reads (``id``, ``doc_id``, ``content``, ``contents``,
``document.contents``, ``score``)
(the shapes and their rule: :mod:`agentrag.kb.retrieve_api`). ``GET /health`` reports the KB.

The token (``Authorization: Bearer TOKEN``, scheme in any case, compared in constant time) is
required on every route when the server has one, ``/health`` included (so a client's pre-check
fails on a wrong token before its first item); on ``/retrieve`` it is checked before the body is read. A request may ask at most ``max_work`` hits
(``len(queries) * topk``); beyond that it is refused with a 413 saying how to split it. The
handler is async: the searches run in a bounded thread pool, a large batch in chunks of about
``chunk_work`` hits, so small requests interleave with a large one instead of waiting for it.
Bad requests get a 4xx naming the field; the server keeps serving. OpenAPI docs are off unless
``docs=True``.

With ``navigation`` (a :class:`~agentrag.kb.nav_state.TrajectoryNavigation`, ``agentrag kb serve
--navigation constrained --distractors K~_DIR``) every query is one step of a trajectory under
RAGShaper's constrained navigation (Eq. 8): the request names it with ``trajectory_id`` (one id
for all its queries, taken as consecutive steps) or ``trajectory_ids`` (one id per query, for a
batch of rollouts). Distractor documents come back like any other document.
``DELETE /trajectories/{id}`` forgets a finished trajectory.
"""

import asyncio
import hmac
import json
import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from agentrag._extras import require
from agentrag.errors import AgentRagError, UserError
from agentrag.kb.base import Retriever
from agentrag.kb.retrieve_api import (
    DEFAULT_MAX_WORK,
    Limits,
    RequestError,
    RetrieveRequest,
    assemble,
    encode_hits,
    parse_request,
)
from agentrag.records import Hit

if TYPE_CHECKING:
    from agentrag.kb.nav_state import TrajectoryNavigation

log = logging.getLogger(__name__)



def bearer_ok(header: str | None, token: str) -> bool:
    """Whether ``header`` is ``Bearer <token>`` (scheme in any case), compared in constant time."""
    scheme, _, credential = (header or "").strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(credential.strip().encode(), token.encode())


class _Searcher:
    """Runs the searches of one request in a bounded thread pool, ``chunk_work`` hits at a time,
    and encodes the hits there too (the event loop only moves bytes).

    Small BM25 requests (at most ``inline_work`` hits each) run on the event loop instead, and
    those that arrive together are searched as one batch: a BM25 query takes a fraction of a
    millisecond, less than a trip through the pool costs in GIL hand-offs (that trip made
    single-query BM25 over HTTP 3x slower), and bm25s answers a batch faster per query. Dense and
    hybrid searches (an embedder call) and constrained navigation always go through the pool.
    """

    def __init__(self, retriever: Retriever, method: str | None, navigation: "TrajectoryNavigation | None",
                 threads: int, chunk_work: int, inline_work: int) -> None:
        self.retriever, self.method, self.navigation = retriever, method, navigation
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kb-search")
        self.chunk_work = chunk_work
        effective = method or getattr(getattr(retriever, "config", None), "method", None)
        self.inline_work = inline_work if effective == "bm25" and navigation is None else 0
        self._waiting: list[tuple[RetrieveRequest, asyncio.Future[bytes]]] = []

    def _hits(self, queries: list[str], ids: list[str] | None, k: int) -> list[list[Hit]]:
        if ids is not None:
            assert self.navigation is not None
            return [self.navigation.search(t, q, k) for t, q in zip(ids, queries, strict=True)]
        if self.method is not None:
            return self.retriever.search(queries, k, method=self.method)  # type: ignore[call-arg]
        return self.retriever.search(queries, k)

    def _search(self, queries: list[str], ids: list[str] | None, req: RetrieveRequest) -> list[bytes]:
        return encode_hits(self._hits(queries, ids, req.topk), req)

    async def run(self, req: RetrieveRequest, ids: list[str] | None) -> bytes:
        loop = asyncio.get_running_loop()
        if len(req.queries) * req.topk <= self.inline_work:
            done: asyncio.Future[bytes] = loop.create_future()
            if not self._waiting:
                loop.call_soon(self._search_waiting)  # after the requests already parsed in this loop turn
            self._waiting.append((req, done))
            return await done
        size = max(1, self.chunk_work // req.topk)
        fragments: list[bytes] = []
        for i in range(0, len(req.queries), size):
            fragments += await loop.run_in_executor(self.pool, self._search, req.queries[i:i + size],
                                                    None if ids is None else ids[i:i + size], req)
        return assemble(fragments, req)

    def _search_waiting(self) -> None:
        """One BM25 batch of the waiting small requests with the same topk (at most ``chunk_work``
        hits, so the loop is never held long); the rest go on in the next loop turn."""
        k = self._waiting[0][0].topk
        batch: list[tuple[RetrieveRequest, asyncio.Future[bytes]]] = []
        rest: list[tuple[RetrieveRequest, asyncio.Future[bytes]]] = []
        work = 0
        for item in self._waiting:
            n = len(item[0].queries) * k
            if item[0].topk == k and (not batch or work + n <= self.chunk_work):
                batch.append(item)
                work += n
            else:
                rest.append(item)
        self._waiting = rest
        if rest:
            asyncio.get_running_loop().call_soon(self._search_waiting)
        try:
            hits = self._hits([q for req, _ in batch for q in req.queries], None, k)
        except Exception as exc:  # noqa: BLE001 - handed to every waiting request, which reports it
            for _, done in batch:
                if not done.done():
                    done.set_exception(exc)
            return
        start = 0
        for req, done in batch:
            end = start + len(req.queries)
            if not done.done():
                done.set_result(assemble(encode_hits(hits[start:end], req), req))
            start = end


def create_app(retriever: Retriever, *, token: str | None = None, default_topk: int = 3, max_topk: int = 100,
               max_queries: int = 512, max_query_chars: int = 4096, max_work: int = DEFAULT_MAX_WORK,
               method: str | None = None, navigation: "TrajectoryNavigation | None" = None, docs: bool = False,
               threads: int = 4, chunk_work: int = 256, inline_work: int = 64) -> Any:
    """The ASGI app serving ``retriever`` (a KnowledgeBase or any Retriever): ``POST /retrieve``
    handled directly, the other routes by FastAPI; with ``navigation``, queries are steps of
    trajectories under Eq. 8 (see the module docstring)."""
    require("fastapi", "kb", purpose="the retrieval server")
    from fastapi import FastAPI, HTTPException, Request
    from starlette.responses import Response

    limits = Limits(default_topk=default_topk, max_topk=max_topk, max_queries=max_queries,
                    max_query_chars=max_query_chars, max_work=max_work)
    searcher = _Searcher(retriever, method, navigation, threads, chunk_work, inline_work)
    app = FastAPI(title="agentrag retrieval server", version="1", docs_url="/docs" if docs else None,
                  redoc_url="/redoc" if docs else None, openapi_url="/openapi.json" if docs else None)

    def _denied(request: Request) -> Any:
        if token and not bearer_ok(request.headers.get("authorization"), token):
            return Response(_detail("missing or wrong bearer token: send 'Authorization: Bearer TOKEN'"), 401,
                            {"WWW-Authenticate": "Bearer"}, media_type="application/json")
        return None

    @app.get("/health")
    def health(request: Request) -> Any:
        denied = _denied(request)  # a client's pre-check then proves its token, not only that the server is up
        if denied is not None:
            return denied
        info: dict[str, Any] = {"status": "ok"}
        for attr in ("name",):
            if hasattr(retriever, attr):
                info["kb"] = getattr(retriever, attr)
        if hasattr(retriever, "__len__"):
            info["passages"] = len(retriever)  # type: ignore[arg-type]
        info["method"] = method or getattr(getattr(retriever, "config", None), "method", None)
        if navigation is not None:
            info.update(navigation.info())
        return info

    @app.delete("/trajectories/{trajectory_id}")
    def end_trajectory(trajectory_id: str, request: Request) -> Any:
        denied = _denied(request)
        if denied is not None:
            return denied
        if navigation is None:
            raise HTTPException(status_code=404, detail="this server does not run constrained navigation")
        return {"trajectory_id": trajectory_id, "forgotten": navigation.end(trajectory_id)}

    def _trajectories(req: RetrieveRequest) -> list[str] | None:
        if navigation is None:
            return None
        if req.trajectory_ids is not None:
            if len(req.trajectory_ids) != len(req.queries):
                raise RequestError(422, f"trajectory_ids has {len(req.trajectory_ids)} ids for {len(req.queries)} "
                                   "queries; give one id per query")
            return req.trajectory_ids
        if req.trajectory_id is not None:
            return [req.trajectory_id] * len(req.queries)
        raise RequestError(422, "constrained navigation needs the trajectory of each query: add \"trajectory_id\": "
                           "\"...\" (or \"trajectory_ids\": [one per query])")

    async def handle(raw: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        try:
            req = parse_request(raw, limits)
            ids = _trajectories(req)
        except RequestError as exc:
            return exc.status, _detail(exc.detail), []
        except (RecursionError, ValueError, TypeError) as exc:  # a body no check foresaw: still the client's
            log.debug("malformed /retrieve body", exc_info=True)
            return 400, _detail(f"malformed request body ({type(exc).__name__}); send {{\"queries\": [\"...\"], "
                                "\"topk\": k}"), []
        try:
            content = await searcher.run(req, ids)
        except UserError as exc:
            return 400, _detail(str(exc)), []
        except AgentRagError as exc:
            log.warning("retrieval failed: %s", exc)
            return 503, _detail(f"retrieval failed: {exc}"), []
        return 200, content, [(b"x-ignored-fields", ",".join(req.ignored).encode())] if req.ignored else []

    max_body = max_queries * (6 * max_query_chars + 16) + 65536  # a character is at most 6 bytes in JSON (\uXXXX)

    async def retrieve(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["method"] != "POST":
            return await _send(send, 405, _detail("use POST /retrieve"), [(b"allow", b"POST")])
        if token:  # before the body is read: a stranger learns nothing about the API
            auth = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
            if not bearer_ok(auth, token):
                return await _send(send, 401, _detail("missing or wrong bearer token: send 'Authorization: Bearer "
                                                      "TOKEN'"), [(b"www-authenticate", b"Bearer")])
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > max_body:
                return await _send(send, 413, _detail(f"request body over {max_body} bytes; split the batch"), [])
        status, content, headers = await handle(b"".join(chunks))
        return await _send(send, status, content, headers)

    return _RetrieveFirst(retrieve, app)


def _detail(message: str) -> bytes:
    return json.dumps({"detail": message}).encode()


async def _send(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


class _RetrieveFirst:
    """The ASGI app: ``/retrieve`` goes straight to its handler (no routing, middleware or
    dependency injection per request, a measurable share of a single-query BM25 request);
    everything else to the FastAPI app."""

    def __init__(self, retrieve: Any, api: Any) -> None:
        self.retrieve, self.api = retrieve, api

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/retrieve":
            await self.retrieve(scope, receive, send)
        else:
            await self.api(scope, receive, send)


def serve(retriever: Retriever, *, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
          method: str | None = None, default_topk: int = 3, navigation: "TrajectoryNavigation | None" = None,
          max_work: int = DEFAULT_MAX_WORK, docs: bool = False) -> None:
    """Run the server with uvicorn until interrupted."""
    uvicorn = require("uvicorn", "kb", purpose="the retrieval server")
    app = create_app(retriever, token=token, method=method, default_topk=default_topk, navigation=navigation,
                     max_work=max_work, docs=docs)
    uvicorn.run(app, host=host, port=port, log_level="warning")


SERVE_ENV = "AGENTRAG_SERVE"


def app_from_env() -> Any:
    """App factory of a worker process of :func:`serve_workers`: loads the KB directory named in
    ``$AGENTRAG_SERVE`` (JSON: kb, overrides, method, topk, max_work, docs) read-only and serves it."""
    import os

    from agentrag.kb.store import KnowledgeBase

    spec = json.loads(os.environ[SERVE_ENV])
    store = KnowledgeBase.load(spec["kb"], overrides=spec.get("overrides") or [])
    if spec.get("method") in (None, "dense", "hybrid"):
        store.embedder  # load the embedder before the first request  # noqa: B018
    return create_app(store, token=os.environ.get("AGENTRAG_KB_TOKEN") or None, method=spec.get("method"),
                      default_topk=int(spec.get("topk", 3)), max_work=int(spec.get("max_work", DEFAULT_MAX_WORK)),
                      docs=bool(spec.get("docs", False)))


def serve_workers(kb: str, workers: int, *, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
                  method: str | None = None, default_topk: int = 3, overrides: list[str] | None = None,
                  max_work: int = DEFAULT_MAX_WORK, docs: bool = False) -> None:
    """Serve the KB directory ``kb`` from ``workers`` uvicorn worker processes on one port; each
    loads the on-disk KB read-only (the OS shares its pages), the kernel balances connections."""
    import os

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    os.environ[SERVE_ENV] = json.dumps({"kb": str(kb), "overrides": overrides or [], "method": method,
                                        "topk": default_topk, "max_work": max_work, "docs": docs})
    if token:
        os.environ["AGENTRAG_KB_TOKEN"] = token
    config = uvicorn.Config("agentrag.kb.server:app_from_env", factory=True, workers=workers, host=host, port=port,
                            log_level="warning")
    try:
        Multiprocess(config, sockets=[tcp_listener(host, port)]).run()
    except KeyboardInterrupt:
        pass


def tcp_listener(host: str, port: int) -> socket.socket:
    """A bound TCP socket for the worker processes. uvicorn's own (``workers=N``) is made without
    the protocol number, so asyncio leaves Nagle's algorithm on for its connections and every
    keep-alive request waits ~40 ms for a delayed ACK; this one names TCP and sets TCP_NODELAY
    (accepted connections inherit it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port} ({exc}); choose another --port or --host") from exc
    sock.set_inheritable(True)
    return sock


__all__ = ["DEFAULT_MAX_WORK", "bearer_ok", "create_app", "serve", "serve_workers", "app_from_env", "tcp_listener"]
