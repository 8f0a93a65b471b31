"""The dense retrieval tool the agents call, its schema, and the uniform document format.

The agent sees every document as ``Doc i (Title: ...) text`` whatever KB it came from; the
structured hits (passage id, score, KB, metadata) go to the trajectory only.

Outages and configuration errors are not observations: a :class:`~agentrag.errors.RetrievalError`
with ``is_retryable`` (the server is down, 5xx after the client's retries) and a
:class:`~agentrag.errors.UserError` such as an :class:`~agentrag.errors.EndpointError` (a
401/403/404 from the retrieval server) propagate out of the tool, so the item stays unfinished or
the run stops; any other retrieval error goes back to the model as an error observation.
Documents cannot speak the protocol: chat-template control tokens (``<|im_end|>``, ``</s>`` ...)
inside retrieved text are always neutralised (:func:`agentrag.protocol.neutralize_control_tokens`),
so a document cannot forge a turn; with ``neutralize`` :func:`neutralize_tags` also escapes the
protocol tags of the tag-based agents and the text-answer marker ``Final_Answer:`` (plan_step),
so a model that copies a document back cannot end a run or call a tool with the document's
words (the rest of the text reaches the model verbatim).
"""

from __future__ import annotations

import json
from typing import Any

from agentrag.agents.base import NavigationPolicy, ToolResult
from agentrag.errors import RetrievalError, UserError
from agentrag.protocol import PROTOCOL_TAGS, neutralize_control_tokens, neutralize_tags, parse_tool_calls
from agentrag.records import Hit, ToolCall

SEARCH_TOOL = "dense_search"
NO_DOCUMENTS = "No documents found."
#: bound on string arguments, so schema-constrained decoding (embedded backend) always terminates
QUERY_MAX_CHARS = 200
def search_tool_schema(name: str = SEARCH_TOOL, default_k: int = 5, max_k: int | None = 20) -> dict[str, Any]:
    """The OpenAI function-tool schema of the dense retrieval tool (arguments ``query``, ``top_k``)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": (
                "Semantic (dense vector) search over the knowledge base: finds the documents whose "
                f"meaning best matches the query. Returns {default_k} documents unless top_k says otherwise."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "A self-contained natural-language description of the information needed.",
                        "minLength": 1,
                        "maxLength": QUERY_MAX_CHARS,
                    },
                    "top_k": _k_schema(f"How many documents to return (1 to {max_k})." if max_k
                                       else "How many documents to return.", max_k),
                },
                "required": ["query"],
            },
        },
    }


def _k_schema(description: str, max_k: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "integer", "description": description, "minimum": 1}
    if max_k is not None:
        out["maximum"] = max_k
    return out


def format_documents(hits: list[Hit], *, neutralize: bool = False, doc_chars: int | None = None) -> str:
    """Documents as the model sees them: ``Doc i (Title: t) text``, one a line, no source KB
    (control tokens always neutralised; ``neutralize`` also escapes protocol tags inside them, see
    :func:`neutralize_tags`; ``doc_chars``
    cuts each text at a word boundary and marks the cut with ``...``)."""
    if not hits:
        return NO_DOCUMENTS
    lines = []
    for i, h in enumerate(hits, start=1):
        text = clip_text(" ".join(h.text.split()), doc_chars)
        lines.append(f"Doc {i} (Title: {h.title}) {text}" if h.title else f"Doc {i} {text}")
    out = "\n".join(lines)
    return neutralize_tags(out) if neutralize else neutralize_control_tokens(out)


def clip_text(text: str, max_chars: int | None) -> str:
    """``text`` cut to at most ``max_chars`` characters at a word boundary, plus ``...``
    (``None`` or a short text: unchanged)."""
    if max_chars is None or len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + " ..."


def parse_top_k(value: Any, default: int, max_k: int | None) -> int:
    """``top_k`` from model arguments: an int or an int-like string, clamped to [1, max_k]
    (``max_k=None``: no cap here, the knowledge base serves what it can)."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValueError(f"top_k must be a positive integer, got {value!r}")
    if isinstance(value, str) and value.strip().lstrip("+").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"top_k must be a positive integer, got {value!r}")
    return value if max_k is None else min(value, max_k)


class RetrievalTool:
    """A :class:`~agentrag.agents.base.Tool` over a navigation policy, for one trajectory.

    It counts its calls (the 1-based step ``t`` of RAGShaper Eq. 8) and remembers the previous
    call's hits, so make a fresh one per question. ``topk_per_step`` lists the top-k of every
    retrieval it ran (Tracer Fig. 3), so ``len(topk_per_step)`` is the trajectory's retrieval
    step count. Failures (bad arguments, non-outage retrieval errors) come back as a
    ``ToolResult`` with ``error`` set and an observation telling the model what went wrong; an
    outage (``RetrievalError.is_retryable``) and an endpoint error (``UserError``) are raised. A top-k above ``max_k`` is capped and
    the observation says so (never silently); ``neutralize`` escapes protocol tags in documents.
    """

    def __init__(self, policy: NavigationPolicy, *, name: str = SEARCH_TOOL, default_k: int = 5,
                 max_k: int | None = 20, query_arg: str = "query", k_arg: str = "top_k",
                 neutralize: bool = False, topk_per_step: list[int] | None = None,
                 doc_chars: int | None = None) -> None:
        self.policy = policy
        self.name = name
        self.default_k = default_k
        self.max_k = max_k
        self.query_arg = query_arg
        self.k_arg = k_arg
        self.schema = search_tool_schema(name, default_k, max_k)
        self.neutralize = neutralize
        self.doc_chars = doc_chars
        self.step = 0
        self.previous_hits: list[Hit] = []
        self.topk_per_step: list[int] = topk_per_step if topk_per_step is not None else []

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        if not isinstance(arguments, dict):
            return _failure(f"arguments must be a JSON object, got {arguments!r}")
        query = arguments.get(self.query_arg)
        if not isinstance(query, str) or not query.strip():
            return _failure(f"argument {self.query_arg!r} must be a non-empty string; got arguments "
                            f"{json.dumps(arguments, ensure_ascii=False)[:200]}")
        try:
            asked = parse_top_k(arguments.get(self.k_arg), self.default_k, None)
        except ValueError as exc:
            return _failure(str(exc))
        k = asked if self.max_k is None else min(asked, self.max_k)
        result = self.search(query.strip(), k)
        if k < asked:
            note = f"{self.k_arg}={asked} is above this agent's limit of {self.max_k}; returned the top {k}"
            result.observation = f"Note: {note}.\n{result.observation}"
        return result

    def search(self, query: str, k: int) -> ToolResult:
        """Run one retrieval step through the policy (counts as step ``t``); an outage raises."""
        self.step += 1
        self.topk_per_step.append(k)
        try:
            hits = self.policy.search(query, k, self.step, self.previous_hits)
        except UserError:
            raise  # a wrong token or URL: the run stops (never an observation)
        except RetrievalError as exc:
            if exc.is_retryable:
                raise
            self.previous_hits = []
            return _failure(f"the search failed ({exc}); try again")
        self.previous_hits = hits
        return ToolResult(observation=format_documents(hits, neutralize=self.neutralize,
                                                          doc_chars=self.doc_chars), hits=hits)


def _failure(message: str) -> ToolResult:
    return ToolResult(observation=f"Error: {message}", error=message)


def tool_calls_from_text(text: str) -> tuple[list[ToolCall], str | None]:
    """Tool calls written as text (:func:`agentrag.protocol.parse_tool_calls`, the one parser the
    backends use too): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks or a
    reply that is one JSON object naming a tool. Returns ``(calls, error)``; ``error`` names the
    first block that is not valid JSON of that shape (a reply that starts like JSON but does not
    parse, e.g. cut off by ``max_tokens``, is such an error). A JSON ``{"answer": ...}`` is not a call."""
    found = parse_tool_calls(text, id_prefix="text_call_")
    return found.calls, found.error


def json_answer(text: str) -> str | None:
    """The answer of a reply that is the JSON object ``{"answer": "..."}``, else ``None``."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        obj = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("answer"), (str, int, float)):
        return str(obj["answer"]).strip()
    return None


__all__ = [
    "SEARCH_TOOL", "search_tool_schema", "format_documents", "clip_text", "parse_top_k", "RetrievalTool", "neutralize_tags",
    "PROTOCOL_TAGS",
    "tool_calls_from_text", "json_answer", "NO_DOCUMENTS", "QUERY_MAX_CHARS",
]
