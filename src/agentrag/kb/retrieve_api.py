"""The request shapes of the retrieval server's ``POST /retrieve``: parse and check a JSON body,
encode hits as JSON bytes.

The response key follows the request key:

- batch (Search-R1, veRL): ``{"queries": [...], "topk"|"top_k": k, "return_scores": b}`` answers
  ``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` (one list per query; with
  ``return_scores`` false each list holds the documents ``{"id", "contents"}`` themselves);
- single (skyrl-gym, AgenticRAGTracer, both rllm tools): ``{"query": "...", "topk"|"top_k": k}``
  answers both ``{"result": [[hit, ...]], "results": [hit, ...]}``: ``result`` is the Search-R1 batch
  shape for the one query (skyrl-gym reads ``result[0][i].document.contents``), ``results`` the flat
  list the others read. Each hit carries every name a client reads: ``{"id", "doc_id", "content",
  "contents", "document": {"id", "contents"}, "score"}`` (scores always; see docs/kb.md for which
  client reads which field).

``top_k`` is an alias of ``topk``; both given and different is a 422. Fields the server does not
know are ignored (clients send extras, e.g. rllm's ``description``/``args``/``kwargs``) and named
in the ``X-Ignored-Fields`` response header. Every bad value is a :class:`RequestError` naming
the field and the fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentrag.errors import UserError
from agentrag.records import Hit

KNOWN_FIELDS = frozenset({"queries", "query", "topk", "top_k", "return_scores", "trajectory_id", "trajectory_ids"})


class RequestError(UserError):
    """A request the server refuses: ``status`` is the HTTP status, the message the reason and fix."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


#: default bound on ``len(queries) * topk`` (hits) per request; `kb serve --max-work` overrides it
DEFAULT_MAX_WORK = 4096


@dataclass(frozen=True)
class Limits:
    """What one request may ask: ``max_work`` bounds ``len(queries) * topk`` (hits per request)."""

    default_topk: int = 3
    max_topk: int = 100
    max_queries: int = 512
    max_query_chars: int = 4096
    max_work: int = DEFAULT_MAX_WORK


@dataclass
class RetrieveRequest:
    queries: list[str]
    topk: int
    return_scores: bool = False
    single: bool = False
    trajectory_id: str | None = None
    trajectory_ids: list[str] | None = None
    ignored: list[str] = field(default_factory=list)


def _int_field(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(422, f"{name} must be an integer, got {_show(value)}")
    return value


def _show(value: Any, limit: int = 80) -> str:
    """A client's value for an error message: its repr cut to ``limit`` characters; a value nested
    too deeply to render is named by its type."""
    try:
        text = repr(value)
    except RecursionError:
        return f"a {type(value).__name__} nested too deeply to show"
    return text if len(text) <= limit else text[:limit] + "..."


def _topk(body: dict[str, Any], limits: Limits) -> int:
    topk, top_k = _int_field(body, "topk"), _int_field(body, "top_k")
    if topk is not None and top_k is not None and topk != top_k:
        raise RequestError(422, f"topk ({topk}) and top_k ({top_k}) disagree; give one of them (top_k is an "
                           "alias of topk)")
    k = topk if topk is not None else top_k if top_k is not None else limits.default_topk
    if not 1 <= k <= limits.max_topk:
        raise RequestError(422, f"topk must be between 1 and {limits.max_topk}, got {k}")
    return k


def _queries(body: dict[str, Any]) -> tuple[list[str], bool]:
    if "query" in body and "queries" in body:
        raise RequestError(422, "give either \"queries\": [...] (a batch) or \"query\": \"...\" (one query), not both")
    if "query" in body:
        q = body["query"]
        if not isinstance(q, str):
            raise RequestError(422, f"query must be a string, got {_show(q)}")
        return [q], True
    if "queries" not in body:
        raise RequestError(422, "missing the queries: send {\"queries\": [\"...\"], \"topk\": k} (a batch) or "
                           "{\"query\": \"...\", \"topk\": k} (one query)")
    qs = body["queries"]
    if not isinstance(qs, list):
        raise RequestError(422, f"queries must be a list of strings, got {type(qs).__name__} {_show(qs)}; for "
                           "one query send [\"...\"] or use \"query\"")
    if not qs:
        raise RequestError(422, "queries must be a non-empty list of strings")
    for i, q in enumerate(qs):
        if not isinstance(q, str):
            raise RequestError(422, f"queries[{i}] must be a string, got {_show(q)}")
    return qs, False


def parse_request(raw: bytes, limits: Limits) -> RetrieveRequest:
    """The checked request of body ``raw``; a :class:`RequestError` (400/413/422) naming what is wrong."""
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise RequestError(400, f"the request body is not JSON ({exc}); send {{\"queries\": [\"...\"], "
                           "\"topk\": k}") from exc
    except RecursionError:
        raise RequestError(400, "the request body is JSON nested too deeply to read; send {\"queries\": "
                           "[\"...\"], \"topk\": k}") from None
    if not isinstance(body, dict):
        raise RequestError(422, f"the request body must be a JSON object, got {type(body).__name__}")
    queries, single = _queries(body)
    k = _topk(body, limits)
    if len(queries) > limits.max_queries:
        raise RequestError(413, f"at most {limits.max_queries} queries per request, got {len(queries)}; split the "
                           "batch")
    for i, q in enumerate(queries):
        if not q.strip():
            raise RequestError(422, "query is empty" if single else f"queries[{i}] is empty")
        if len(q) > limits.max_query_chars:
            raise RequestError(413, f"{'query' if single else f'queries[{i}]'} is longer than "
                               f"{limits.max_query_chars} characters")
    work = len(queries) * k
    if work > limits.max_work:
        raise RequestError(413, f"this request asks for {len(queries)} queries x topk {k} = {work} hits, above this "
                           f"server's bound of {limits.max_work} per request (kb serve --max-work); split it into "
                           f"requests of at most {max(1, limits.max_work // k)} queries each")
    scores = body.get("return_scores", False)
    if not isinstance(scores, bool):
        raise RequestError(422, f"return_scores must be true or false, got {_show(scores)}")
    tid = body.get("trajectory_id")
    if tid is not None and not isinstance(tid, str):
        raise RequestError(422, f"trajectory_id must be a string, got {_show(tid)}")
    tids = body.get("trajectory_ids")
    if tids is not None and (not isinstance(tids, list) or not all(isinstance(t, str) for t in tids)):
        raise RequestError(422, f"trajectory_ids must be a list of strings (one per query), got {_show(tids)}")
    return RetrieveRequest(queries=queries, topk=k, return_scores=scores, single=single, trajectory_id=tid,
                           trajectory_ids=tids, ignored=sorted(set(body) - KNOWN_FIELDS))


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def single_hit(h: Hit) -> dict[str, Any]:
    """One hit of the single-query answer, under every field name the clients read."""
    return {"id": h.id, "doc_id": h.id, "content": h.contents, "contents": h.contents,
            "document": {"id": h.id, "contents": h.contents}, "score": h.score}


def encode_hits(hits: list[list[Hit]], req: RetrieveRequest) -> list[bytes]:
    """One JSON fragment per query, in the request's shape (see the module docstring)."""
    if req.single:
        return [_dumps([single_hit(h) for h in per_q]) for per_q in hits]
    if req.return_scores:
        return [_dumps([{"document": {"id": h.id, "contents": h.contents}, "score": h.score} for h in per_q])
                for per_q in hits]
    return [_dumps([{"id": h.id, "contents": h.contents} for h in per_q]) for per_q in hits]


def assemble(fragments: list[bytes], req: RetrieveRequest) -> bytes:
    """The response body from the per-query fragments of :func:`encode_hits`."""
    if req.single:
        return b'{"result":[' + fragments[0] + b'],"results":' + fragments[0] + b"}"
    return b'{"result":[' + b",".join(fragments) + b"]}"


__all__ = ["DEFAULT_MAX_WORK", "KNOWN_FIELDS", "Limits", "RequestError", "RetrieveRequest", "assemble", "encode_hits", "parse_request", "single_hit"]
