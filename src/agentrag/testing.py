"""Public fakes for fast tests: ScriptedLLM, FakeRetriever, HashEmbedder.

They implement the real protocols (DESIGN §3) deterministically and without models, so unit
tests of agents and synthesizers run in milliseconds. Never used by the product itself.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Union

import numpy as np

from agentrag.errors import LLMError
from agentrag.kb.base import EmbedKind, apply_threshold
from agentrag.llm.base import Completion
from agentrag.records import Hit, Message, Passage, ToolCall, Usage

ScriptItem = Union[str, ToolCall, list[ToolCall], Completion, BaseException, Callable[..., Any]]


class ScriptedLLM:
    """An LLM that answers from a script, in order, and counts its calls.

    Script items: a string (the completion text), a ``ToolCall`` or list of them, a full
    ``Completion``, an exception instance (raised), or a callable ``f(messages, **kwargs)``
    returning any of these. When the script runs out, ``default`` is used (or LLMError raised).
    ``calls`` counts ``chat`` invocations; ``requests`` keeps what each call received.
    """

    def __init__(self, script: Sequence[ScriptItem] = (), *, default: ScriptItem | None = None,
                 model: str = "scripted", cycle: bool = False):
        self.script = list(script)
        self.default = default
        self.model = model
        self.cycle = cycle
        self.calls = 0
        self.requests: list[dict[str, Any]] = []
        self._pos = 0
        self._lock = threading.Lock()

    def _next(self) -> ScriptItem:
        with self._lock:
            if self._pos < len(self.script):
                item = self.script[self._pos]
                self._pos += 1
                return item
            if self.cycle and self.script:
                self._pos = 1
                return self.script[0]
        if self.default is not None:
            return self.default
        raise LLMError(f"ScriptedLLM: script exhausted after {len(self.script)} items", is_retryable=False)

    def _complete(self, item: ScriptItem, messages: list[Message], **kwargs: Any) -> Completion:
        if callable(item) and not isinstance(item, (ToolCall, Completion, BaseException)):
            item = item(messages, **kwargs)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Completion):
            return item
        usage = Usage(prompt_tokens=sum(len((m.content or "").split()) for m in messages), calls=1)
        if isinstance(item, ToolCall):
            item = [item]
        if isinstance(item, list):
            calls = [tc if tc.id else tc.model_copy(update={"id": f"call_{i}"}) for i, tc in enumerate(item)]
            return Completion(text=None, tool_calls=calls, finish_reason="tool_calls", usage=usage)
        text = str(item)
        usage.completion_tokens = len(text.split())
        return Completion(text=text, finish_reason="stop", usage=usage)

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        with self._lock:
            self.calls += 1
            self.requests.append({"messages": list(messages), "tools": tools,
                                  "response_format": response_format, "n": n, **sampling})
        kwargs = {"tools": tools, "response_format": response_format, **sampling}
        return [self._complete(self._next(), messages, **kwargs) for _ in range(n)]

    async def achat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    response_format: dict[str, Any] | None = None, n: int = 1,
                    **sampling: Any) -> list[Completion]:
        return self.chat(messages, tools=tools, response_format=response_format, n=n, **sampling)


_TOKEN = re.compile(r"\w+")


class HashEmbedder:
    """Deterministic bag-of-words embeddings by feature hashing (no model)."""

    def __init__(self, dim: int = 64):
        self.dim = dim

    def embed(self, texts: list[str], kind: EmbedKind = "query") -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in _TOKEN.findall(t.lower()):
                h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 63) == 0 else -1.0
            norm = float(np.linalg.norm(out[i]))
            if norm > 0:
                out[i] /= norm
        return out


class FakeRetriever:
    """Retrieves from an in-memory list of passages by word overlap (Jaccard); counts calls."""

    def __init__(self, passages: Sequence[Passage], *, kb: str = "main", method: str = "fake"):
        self.passages = list(passages)
        self.kb = kb
        self.method = method
        self.calls = 0
        self.queries: list[str] = []

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Hit]]:
        self.calls += 1
        self.queries.extend(queries)
        results = []
        for q in queries:
            qt = set(_TOKEN.findall(q.lower()))
            hits = []
            for p in self.passages:
                pt = set(_TOKEN.findall(p.contents.lower()))
                score = len(qt & pt) / max(1, len(qt | pt))
                hits.append(Hit(id=p.id, title=p.title, text=p.text, score=score, method=self.method,
                                kb=self.kb, metadata=dict(p.metadata)))
            results.append(apply_threshold(hits, k, threshold))
        return results


__all__ = ["ScriptedLLM", "FakeRetriever", "HashEmbedder", "ScriptItem"]
