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




CHATML_SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")


def chatml_byte_tokenizer() -> Any:
    """A Hugging Face fast tokenizer built in memory (no model files): one token per UTF-8 byte
    (byte-level BPE without merges) plus the ChatML special tokens, so chat templates, assistant
    masks and offsets behave as with a real ChatML model (needs ``agentrag[train]``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tk = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    tk.add_special_tokens(list(CHATML_SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>")


class StubOpenAIServer:
    """A local OpenAI-compatible HTTP stub (threaded ``http.server``) for fault and overhead tests.

    ``faults`` is consumed one per request: ``"500"`` / ``"429"`` (that status), ``"stall"``
    (sleep ``stall_s`` before answering, to trip client timeouts), ``"malformed"`` (200 with a
    body that is not JSON), ``"ok"``. Once ``faults`` runs out every request is answered with
    ``reply`` (a text, or a dict used as the assistant message) after ``latency`` seconds.
    ``requests`` counts requests; ``bodies`` keeps their JSON. Use as a context manager.
    """

    def __init__(self, faults: Sequence[str] = (), *, reply: str | dict[str, Any] = "ok",
                 latency: float = 0.0, stall_s: float = 5.0) -> None:
        self.faults = list(faults)
        self.reply = reply
        self.latency = latency
        self.stall_s = stall_s
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _fault(self, body: dict[str, Any]) -> str:
        with self._lock:
            self.requests += 1
            self.bodies.append(body)
            return self.faults.pop(0) if self.faults else "ok"

    def _response(self, body: dict[str, Any]) -> dict[str, Any]:
        msg: dict[str, Any] = dict(self.reply) if isinstance(self.reply, dict) else {"content": self.reply}
        msg.setdefault("role", "assistant")
        msg.setdefault("content", None)
        n = int(body.get("n") or 1)
        return {"id": "stub", "object": "chat.completion", "created": 0, "model": body.get("model", "stub"),
                "choices": [{"index": i, "message": msg, "finish_reason": "tool_calls" if msg.get("tool_calls")
                             else "stop"} for i in range(n)],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}

    def __enter__(self) -> StubOpenAIServer:
        import json
        import time
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # silence the default stderr log
                return

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    return

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                fault = stub._fault(body)
                if fault in ("500", "429", "503", "400"):
                    self._send(int(fault), json.dumps({"error": {"message": f"stub {fault}"}}).encode())
                    return
                if fault == "stall":
                    time.sleep(stub.stall_s)
                if fault == "malformed":
                    self._send(200, b'{"choices": [ this is not json')
                    return
                if stub.latency:
                    time.sleep(stub.latency)
                self._send(200, json.dumps(stub._response(body)).encode())

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


__all__ = ["ScriptedLLM", "FakeRetriever", "HashEmbedder", "ScriptItem", "StubOpenAIServer", "chatml_byte_tokenizer"]
