"""A Search-R1-compatible retrieval server over a knowledge base (FastAPI).

``POST /retrieve {"queries": [...], "topk": k, "return_scores": bool}`` answers
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` (with
``return_scores`` false, each inner list holds the documents themselves). ``GET /health``
reports the KB. Bad requests get a 4xx with a reason; the server keeps serving.
"""


import logging
from typing import Any

from agentrag._extras import require
from agentrag.errors import AgentRagError, UserError
from agentrag.kb.base import Retriever

log = logging.getLogger(__name__)


def create_app(retriever: Retriever, *, token: str | None = None, default_topk: int = 3, max_topk: int = 100,
               max_queries: int = 512, max_query_chars: int = 4096, method: str | None = None) -> Any:
    """The FastAPI app serving ``retriever`` (a KnowledgeBase or any Retriever)."""
    require("fastapi", "kb", purpose="the retrieval server")
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr

    class RetrieveRequest(BaseModel):
        model_config = ConfigDict(extra="ignore")
        queries: list[StrictStr]
        topk: StrictInt | None = None
        return_scores: StrictBool = False

    app = FastAPI(title="agentrag retrieval server", version="1")

    def _check_auth(request: Request) -> None:
        if token and request.headers.get("authorization", "") != f"Bearer {token}":
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    @app.get("/health")
    def health() -> dict[str, Any]:
        info: dict[str, Any] = {"status": "ok"}
        for attr in ("name",):
            if hasattr(retriever, attr):
                info["kb"] = getattr(retriever, attr)
        if hasattr(retriever, "__len__"):
            info["passages"] = len(retriever)  # type: ignore[arg-type]
        info["method"] = method or getattr(getattr(retriever, "config", None), "method", None)
        return info

    @app.post("/retrieve")
    def retrieve(req: RetrieveRequest, request: Request) -> Any:
        _check_auth(request)
        k = default_topk if req.topk is None else req.topk
        if not 1 <= k <= max_topk:
            raise HTTPException(status_code=422, detail=f"topk must be between 1 and {max_topk}, got {k}")
        if not req.queries:
            raise HTTPException(status_code=422, detail="queries must be a non-empty list of strings")
        if len(req.queries) > max_queries:
            raise HTTPException(status_code=413, detail=f"at most {max_queries} queries per request, got "
                                f"{len(req.queries)}")
        for i, q in enumerate(req.queries):
            if not q.strip():
                raise HTTPException(status_code=422, detail=f"queries[{i}] is empty")
            if len(q) > max_query_chars:
                raise HTTPException(status_code=413, detail=f"queries[{i}] is longer than {max_query_chars} "
                                    "characters")
        try:
            if method is not None:
                hits = retriever.search(req.queries, k, method=method)  # type: ignore[call-arg]
            else:
                hits = retriever.search(req.queries, k)
        except UserError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except AgentRagError as exc:
            log.warning("retrieval failed: %s", exc)
            return JSONResponse(status_code=503, content={"detail": f"retrieval failed: {exc}"})
        result = []
        for per_q in hits:
            docs = [{"id": h.id, "contents": h.contents} for h in per_q]
            result.append([{"document": d, "score": h.score} for d, h in zip(docs, per_q, strict=True)]
                          if req.return_scores else docs)
        return {"result": result}

    return app


def serve(retriever: Retriever, *, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
          method: str | None = None, default_topk: int = 3) -> None:
    """Run the server with uvicorn until interrupted."""
    uvicorn = require("uvicorn", "kb", purpose="the retrieval server")
    app = create_app(retriever, token=token, method=method, default_topk=default_topk)
    uvicorn.run(app, host=host, port=port, log_level="warning")


SERVE_ENV = "AGENTRAG_SERVE"


def app_from_env() -> Any:
    """App factory of a worker process of :func:`serve_workers`: loads the KB directory named in
    ``$AGENTRAG_SERVE`` (JSON: kb, overrides, method, topk) read-only and serves it."""
    import json
    import os

    from agentrag.kb.store import KnowledgeBase

    spec = json.loads(os.environ[SERVE_ENV])
    store = KnowledgeBase.load(spec["kb"], overrides=spec.get("overrides") or [])
    if spec.get("method") in (None, "dense", "hybrid"):
        store.embedder  # load the embedder before the first request  # noqa: B018
    return create_app(store, token=os.environ.get("AGENTRAG_KB_TOKEN") or None, method=spec.get("method"),
                      default_topk=int(spec.get("topk", 3)))


def serve_workers(kb: str, workers: int, *, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
                  method: str | None = None, default_topk: int = 3, overrides: list[str] | None = None) -> None:
    """Serve the KB directory ``kb`` from ``workers`` uvicorn worker processes on one port; each
    loads the on-disk KB read-only (the OS shares its pages), the kernel balances connections."""
    import json
    import os

    import uvicorn

    os.environ[SERVE_ENV] = json.dumps({"kb": str(kb), "overrides": overrides or [], "method": method,
                                        "topk": default_topk})
    if token:
        os.environ["AGENTRAG_KB_TOKEN"] = token
    uvicorn.run("agentrag.kb.server:app_from_env", factory=True, workers=workers, host=host, port=port,
                log_level="warning")


__all__ = ["create_app", "serve", "serve_workers", "app_from_env"]
