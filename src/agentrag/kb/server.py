"""A Search-R1-compatible retrieval server over a knowledge base (FastAPI).

``POST /retrieve {"queries": [...], "topk": k, "return_scores": bool}`` answers
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` (with
``return_scores`` false, each inner list holds the documents themselves). ``GET /health``
reports the KB. Bad requests get a 4xx with a reason; the server keeps serving.

With ``navigation`` (a :class:`~agentrag.kb.nav_state.TrajectoryNavigation`, ``agentrag kb serve
--navigation constrained --distractors K~_DIR``) every query is one step of a trajectory under
RAGShaper's constrained navigation (Eq. 8): the request names it with ``trajectory_id`` (one id
for all its queries, taken as consecutive steps) or ``trajectory_ids`` (one id per query, for a
batch of rollouts). Distractor documents come back like any other document.
``DELETE /trajectories/{id}`` forgets a finished trajectory.
"""


import logging
from typing import TYPE_CHECKING, Any

from agentrag._extras import require
from agentrag.errors import AgentRagError, UserError
from agentrag.kb.base import Retriever

if TYPE_CHECKING:
    from agentrag.kb.nav_state import TrajectoryNavigation

log = logging.getLogger(__name__)


def create_app(retriever: Retriever, *, token: str | None = None, default_topk: int = 3, max_topk: int = 100,
               max_queries: int = 512, max_query_chars: int = 4096, method: str | None = None,
               navigation: "TrajectoryNavigation | None" = None) -> Any:
    """The FastAPI app serving ``retriever`` (a KnowledgeBase or any Retriever); with
    ``navigation``, queries are steps of trajectories under Eq. 8 (see the module docstring)."""
    require("fastapi", "kb", purpose="the retrieval server")
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr

    class RetrieveRequest(BaseModel):
        model_config = ConfigDict(extra="ignore")
        queries: list[StrictStr]
        topk: StrictInt | None = None
        return_scores: StrictBool = False
        trajectory_id: StrictStr | None = None
        trajectory_ids: list[StrictStr] | None = None

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
        if navigation is not None:
            info.update(navigation.info())
        return info

    @app.delete("/trajectories/{trajectory_id}")
    def end_trajectory(trajectory_id: str, request: Request) -> dict[str, Any]:
        _check_auth(request)
        if navigation is None:
            raise HTTPException(status_code=404, detail="this server does not run constrained navigation")
        return {"trajectory_id": trajectory_id, "forgotten": navigation.end(trajectory_id)}

    def _navigate(req: RetrieveRequest, k: int) -> list[Any]:
        assert navigation is not None
        if req.trajectory_ids is not None:
            if len(req.trajectory_ids) != len(req.queries):
                raise HTTPException(status_code=422, detail=f"trajectory_ids has {len(req.trajectory_ids)} ids for "
                                    f"{len(req.queries)} queries; give one id per query")
            ids = req.trajectory_ids
        elif req.trajectory_id is not None:
            ids = [req.trajectory_id] * len(req.queries)
        else:
            raise HTTPException(status_code=422, detail="constrained navigation needs the trajectory of each query: "
                                "add \"trajectory_id\": \"...\" (or \"trajectory_ids\": [one per query])")
        return [navigation.search(tid, q, k) for tid, q in zip(ids, req.queries, strict=True)]

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
            if navigation is not None:
                hits = _navigate(req, k)
            elif method is not None:
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
          method: str | None = None, default_topk: int = 3, navigation: "TrajectoryNavigation | None" = None) -> None:
    """Run the server with uvicorn until interrupted."""
    uvicorn = require("uvicorn", "kb", purpose="the retrieval server")
    app = create_app(retriever, token=token, method=method, default_topk=default_topk, navigation=navigation)
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
