"""The RAGShaper fake world behind a real HTTP endpoint: a StubOpenAIServer answering as the
scripted curator / teacher of :mod:`test_ragshaper_support`, with faults routed to one kind of
request (``fault_for``), an LLM YAML with fast retries, and a small KB over the support passages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_ragshaper_support import PASSAGES, curator_reply, teacher_reply

from agentrag.records import Message, ToolCall
from agentrag.testing import StubOpenAIServer


def kind(body: dict[str, Any]) -> str:
    """What a request is: ``teacher`` (it offers tools) or the response_format name."""
    if body.get("tools"):
        return "teacher"
    return str((body.get("response_format") or {}).get("json_schema", {}).get("name", ""))


def world_reply(body: dict[str, Any]) -> str | dict[str, Any]:
    """The support world's answer to an OpenAI chat request body."""
    messages = [Message(role=m["role"], content=m.get("content")) for m in body.get("messages", [])]
    if kind(body) == "teacher":
        out = teacher_reply(messages, tools=body["tools"])
        if isinstance(out, ToolCall):
            return {"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": out.name, "arguments": json.dumps(out.arguments)}}]}
        return str(out)
    return curator_reply(messages, response_format=body.get("response_format"))


class WorldStub(StubOpenAIServer):
    """The world's endpoint; ``fault_for(body)`` (a fault name or None) overrides the ``faults``
    queue for the requests it names."""

    def __init__(self, faults: list[str] | tuple[str, ...] = (),
                 fault_for: Callable[[dict[str, Any]], str | None] | None = None) -> None:
        super().__init__(faults, reply=world_reply)
        self.fault_for = fault_for

    def _fault(self, body: dict[str, Any]) -> str:
        fault = self.fault_for(body) if self.fault_for is not None else None
        if fault is None:
            return super()._fault(body)
        with self._lock:
            self.requests += 1
            self.bodies.append(body)
            self.injected.append(fault)
        return fault


def llm_yaml(path: Path, base_url: str) -> Path:
    """An LLM reference (YAML) for ``base_url``: one retry, no backoff, no wait."""
    path.write_text(f"backend: openai\nmodel: stub\nbase_url: {base_url}\napi_key: k\ntimeout: 5\n"
                    "max_retries: 1\nbackoff_initial: 0\nbackoff_max: 0\n")
    return path


def build_kb(directory: Path) -> Path:
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.testing import HashEmbedder

    KnowledgeBase.build(PASSAGES, directory, KBConfig(name="main"), embedder=HashEmbedder(32), progress=False)
    return directory
