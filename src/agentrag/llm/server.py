"""An OpenAI-compatible HTTP endpoint for any agentrag LLM (``agentrag llm serve``).

``POST /v1/chat/completions`` accepts the OpenAI request (messages, tools, response_format,
n, temperature, top_p, max_tokens, stop, seed) and answers in the OpenAI response shape, with
tool-call arguments as JSON strings. Behind it runs the same ``LLM.chat`` path as in process,
so tool calls and JSON schemas on the embedded model go through its grammar constraints.
"""


import json
import time
import uuid
from typing import Any

from agentrag._extras import require
from agentrag.errors import AgentRagError, ContextLimitError, UserError
from agentrag.llm.base import LLM, Completion
from agentrag.llm.parsing import message_from_openai

SAMPLING = ("temperature", "top_p", "max_tokens", "stop", "seed")


def completion_payload(model: str, completions: list[Completion]) -> dict[str, Any]:
    """OpenAI ``chat.completion`` JSON for a list of completions."""
    choices = []
    prompt = completion_tokens = 0
    for i, c in enumerate(completions):
        # an empty reply is "" (content null without tool calls is not a valid completion)
        msg: dict[str, Any] = {"role": "assistant", "content": c.text if c.text or c.tool_calls else ""}
        if c.tool_calls:
            msg["tool_calls"] = [{"id": tc.id or f"call_{j}", "type": "function",
                                  "function": {"name": tc.name, "arguments": json.dumps(tc.arguments)}}
                                 for j, tc in enumerate(c.tool_calls)]
        choices.append({"index": i, "message": msg, "finish_reason": c.finish_reason})
        prompt = max(prompt, c.usage.prompt_tokens)
        completion_tokens += c.usage.completion_tokens
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:16]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": choices,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                      "total_tokens": prompt + completion_tokens}}


def create_app(llm: LLM) -> Any:
    """A FastAPI app serving ``llm`` (requests are handled in FastAPI's thread pool)."""
    require("fastapi", "llm", purpose="the LLM server")
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    # No ``from __future__ import annotations`` in this module: FastAPI must see ``Request`` itself.
    app = FastAPI(title="agentrag LLM server", version="1")

    def error(status: int, message: str, kind: str) -> JSONResponse:
        return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "model": llm.model}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": llm.model, "object": "model", "owned_by": "agentrag"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return error(400, "request body is not JSON", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error(400, "expected a JSON object with a 'messages' list", "invalid_request_error")
        if body.get("stream"):
            return error(400, "streaming is not supported by this server", "invalid_request_error")
        try:
            messages = [message_from_openai(m) for m in body["messages"]]
            sampling = {k: body[k] for k in SAMPLING if body.get(k) is not None}
            if isinstance(sampling.get("stop"), str):
                sampling["stop"] = [sampling["stop"]]
            out = await llm.achat(messages, tools=body.get("tools") or None,
                                  response_format=body.get("response_format") or None,
                                  n=int(body.get("n") or 1), **sampling)
        except ContextLimitError as exc:  # its message says "maximum context length": clients map it back
            return error(400, str(exc), "context_length_exceeded")
        except (UserError, ValueError, TypeError) as exc:
            return error(400, str(exc), "invalid_request_error")
        except AgentRagError as exc:
            return error(500, str(exc), "server_error")
        return JSONResponse(completion_payload(llm.model, out))

    return app


def serve(llm: LLM, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the server in the foreground (blocks until interrupted)."""
    uvicorn = require("uvicorn", "llm", purpose="the LLM server")
    uvicorn.run(create_app(llm), host=host, port=port, log_level="warning")


__all__ = ["create_app", "serve", "completion_payload"]
