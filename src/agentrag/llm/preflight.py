"""The endpoint pre-flight of an LLM reference: before the first item, one cheap request
(``GET /models``) to an OpenAI-compatible endpoint, so a dead endpoint or a refused key is one
:class:`UserError` line naming the endpoint and the fix, in seconds, instead of retries on every
item. Embedded and local checkpoints need none; the hosted default endpoint is not probed."""

from __future__ import annotations

import os

from agentrag.errors import UserError
from agentrag.llm.reference import LLMRef, parse_llm_ref

#: seconds the pre-flight waits for an endpoint
PREFLIGHT_TIMEOUT_S = 4.0


def preflight_llm(ref: str | LLMRef) -> None:
    """GET ``/models`` of an OpenAI-compatible ``ref`` with a named endpoint (its URL or
    ``$OPENAI_BASE_URL``): no answer or a 401/403 is a UserError. Any other status (a server
    without ``/models``) passes: the endpoint is up. A reference that does not parse passes too
    (the command's own input checks report it in their words)."""
    import httpx

    try:
        parsed = parse_llm_ref(ref)
    except UserError:
        return
    base = parsed.endpoint
    if not base:
        return
    key = parsed.config.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    try:
        resp = httpx.get(f"{base}/models", headers={"Authorization": f"Bearer {key}"}, timeout=PREFLIGHT_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise UserError(f"LLM endpoint {base} ({parsed.text}) does not answer ({type(exc).__name__}: {exc}); start "
                        "the server (e.g. agentrag llm serve) or fix the URL in --llm openai:MODEL@URL") from None
    if resp.status_code in (401, 403):
        raise UserError(f"LLM endpoint {base} ({parsed.text}) refused the API key ({resp.status_code}); set "
                        "OPENAI_API_KEY or api_key in the --llm YAML file") from None


__all__ = ["preflight_llm", "PREFLIGHT_TIMEOUT_S"]
