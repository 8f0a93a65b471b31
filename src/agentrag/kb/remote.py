"""A client of Search-R1-style retrieval servers (``POST /retrieve``, ``GET /health``): the
:class:`RemoteRetriever` an ``--kb http://host:port`` reference resolves to."""

from __future__ import annotations

from typing import Any

from agentrag.errors import EndpointError, RetrievalError, UserError
from agentrag.kb.base import apply_threshold
from agentrag.records import Hit

#: the environment variable holding the retrieval server's bearer token (client and server)
TOKEN_ENV = "AGENTRAG_KB_TOKEN"


def split_contents(contents: str) -> tuple[str, str]:
    """FlashRAG ``"Title\\ntext"`` -> (title, text), unquoting a quoted title."""
    title, sep, text = contents.partition("\n")
    if not sep:
        return "", contents
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text


class RemoteRetriever:
    """Retriever protocol over HTTP against any Search-R1-style ``POST /retrieve`` server.

    Transient failures (connection errors, timeouts, 429/5xx, a 200 reply whose JSON has the
    wrong shape) are retried with exponential backoff and jitter (tenacity, as the LLM client
    does): ``max_retries`` retries after the first attempt. When they are spent the
    :class:`RetrievalError` keeps ``is_retryable=True``: it is an outage, and the eval runner
    leaves the item unfinished. A 401/403 (token) or 404 (URL) is an :class:`EndpointError`: no
    retry can fix it, so the run stops. ``health()`` checks ``GET /health``, token included,
    before a run.
    """

    def __init__(self, url: str, token: str | None = None, *, kb: str = "remote", timeout: float = 60.0,
                 client: Any = None, max_retries: int = 4, backoff_initial: float = 0.5,
                 backoff_max: float = 8.0) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.endpoint = self.url if self.url.endswith("/retrieve") else self.url + "/retrieve"
        self.base = self.endpoint[: -len("/retrieve")]
        self.kb = kb
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = client or httpx.Client(timeout=timeout, headers=headers)
        self._headers = headers
        self.max_retries = max_retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.attempts = 0

    def health(self) -> dict[str, Any]:
        """``GET /health`` of the server, with the token: an :class:`EndpointError` when the
        server rejects the token (401/403), a :class:`UserError` saying how to fix it when it
        does not answer."""
        import httpx

        try:
            resp = self.client.get(self.base + "/health", headers=self._headers)
            if resp.status_code in (401, 403):
                raise self._rejected(resp, "/health")
            resp.raise_for_status()
            info = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise UserError(f"--kb {self.url!r}: the retrieval server does not answer GET /health ({exc}); start "
                            "it (agentrag kb serve KB_DIR) or pass a KB directory") from exc
        return info if isinstance(info, dict) else {"status": info}

    def _rejected(self, resp: Any, path: str) -> EndpointError:
        """The error of a 401/403 (token) or 404 (URL) reply: no retry can fix it, the run stops."""
        if resp.status_code == 404:
            fix = (f"the retrieval server at {self.base} has no {path} (404): check the --kb URL "
                   "(a Search-R1-style server answering POST /retrieve)")
        else:
            given = "the token given" if self._headers else "no token"
            fix = (f"the retrieval server at {self.base} rejected {given} ({resp.status_code}): pass its token "
                   f"(set {TOKEN_ENV}, or RemoteRetriever(url, token=...)) as given to `agentrag kb serve --token`")
        return EndpointError(f"{fix}; it answered: {resp.text[:200]}", endpoint=self.base, status=resp.status_code)

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Hit]]:
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

        if not queries:
            return []
        payload = {"queries": list(queries), "topk": int(k), "return_scores": True}
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential_jitter(initial=self.backoff_initial, max=self.backoff_max,
                                         jitter=self.backoff_initial),
            retry=retry_if_exception(lambda e: isinstance(e, RetrievalError) and e.is_retryable), reraise=True)
        try:
            result = retrying(self._attempt, payload, len(queries))
        except RetrievalError as exc:
            if not exc.is_retryable:
                raise
            raise RetrievalError(f"{exc} (gave up after {self.max_retries + 1} attempts)", is_retryable=True) from exc
        return [apply_threshold([self._hit(item, rank) for rank, item in enumerate(per_q)], k, threshold)
                for per_q in result]

    def _attempt(self, payload: dict[str, Any], n: int) -> list[Any]:
        """One POST; the parsed ``result`` list, checked for shape (documents with ``contents``)."""
        import httpx

        self.attempts += 1
        try:
            resp = self.client.post(self.endpoint, json=payload, headers=self._headers)
        except httpx.HTTPError as exc:
            raise RetrievalError(f"retrieval server {self.endpoint} unreachable: {exc}", is_retryable=True) from exc
        if resp.status_code in (401, 403, 404):
            raise self._rejected(resp, "/retrieve")
        if resp.status_code >= 400:
            raise RetrievalError(f"retrieval server {self.endpoint} answered {resp.status_code}: {resp.text[:300]}",
                                 is_retryable=resp.status_code >= 500 or resp.status_code == 429)
        try:
            result = resp.json()["result"]
        except (ValueError, KeyError, TypeError) as exc:
            raise RetrievalError(f"retrieval server {self.endpoint} sent no 'result' list: {resp.text[:300]}",
                                 is_retryable=True) from exc
        if (not isinstance(result, list) or len(result) != n
                or not all(isinstance(per_q, list) and all(_is_document(d) for d in per_q) for per_q in result)):
            raise RetrievalError(f"retrieval server {self.endpoint} sent a 'result' of the wrong shape for {n} "
                                 f"queries: {resp.text[:300]}", is_retryable=True)
        return result

    def _hit(self, item: Any, rank: int) -> Hit:
        if isinstance(item, dict) and "document" in item:
            doc, score = item["document"], float(item.get("score", 0.0))
        else:
            doc, score = item, -float(rank)
        title, text = split_contents(str(doc["contents"]))
        from agentrag.kb.ingest import passage_id

        pid = str(doc.get("id", "")) or passage_id(title, text)
        return Hit(id=pid, title=title, text=text, score=score, method="remote", kb=self.kb)


def _is_document(item: Any) -> bool:
    """A Search-R1 result entry: ``{"document": {..."contents"}, "score": number}`` or the document itself."""
    if isinstance(item, dict) and "document" in item:
        score = item.get("score", 0.0)
        return (isinstance(item["document"], dict) and "contents" in item["document"]
                and isinstance(score, (int, float)) and not isinstance(score, bool))
    return isinstance(item, dict) and "contents" in item


__all__ = ["RemoteRetriever", "split_contents", "TOKEN_ENV"]
