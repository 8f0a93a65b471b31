"""Public fakes for fast tests: ScriptedLLM, FakeRetriever, HashEmbedder.

They implement the real protocols (DESIGN §3) deterministically and without models, so unit
tests of agents and synthesizers run in milliseconds. Never used by the product itself.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
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
    ``calls`` counts ``chat`` invocations; ``requests`` keeps what each call received (unless
    ``record=False``: benchmarks at many items, where the log would be most of the memory).
    """

    def __init__(self, script: Sequence[ScriptItem] = (), *, default: ScriptItem | None = None,
                 model: str = "scripted", cycle: bool = False, record: bool = True):
        self.script = list(script)
        self.default = default
        self.model = model
        self.cycle = cycle
        self.record = record
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
            if self.record:
                self.requests.append({"messages": list(messages), "tools": tools,
                                      "response_format": response_format, "n": n, **sampling})
        kwargs = {"tools": tools, "response_format": response_format, **sampling}
        return [self._complete(self._next(), messages, **kwargs) for _ in range(n)]

    async def achat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    response_format: dict[str, Any] | None = None, n: int = 1,
                    **sampling: Any) -> list[Completion]:
        return self.chat(messages, tools=tools, response_format=response_format, n=n, **sampling)


class OutageLLM:
    """Fault injection: while ``down`` is true, every call whose request ``fails`` (all calls by
    default) raises ``LLMError(is_retryable=True)``, as a backend does after its retries on HTTP
    500; other calls go to ``inner``. Flip ``down`` to False to bring the backend back."""

    def __init__(self, inner: Any = None, *, down: bool = True,
                 fails: Callable[[list[Message], dict[str, Any]], bool] | None = None, model: str = "outage"):
        self.inner = inner
        self.down = down
        self.fails = fails
        self.model = getattr(inner, "model", model)
        self.failures = 0
        self._lock = threading.Lock()

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        kwargs = {"tools": tools, "response_format": response_format, **sampling}
        if self.down and (self.fails is None or self.fails(messages, kwargs)):
            with self._lock:
                self.failures += 1
            raise LLMError("HTTP 500: internal server error (injected outage)", is_retryable=True)
        if self.inner is None:
            raise LLMError("OutageLLM: no inner LLM to answer a healthy call", is_retryable=False)
        return list(self.inner.chat(messages, tools=tools, response_format=response_format, n=n, **sampling))

    async def achat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    response_format: dict[str, Any] | None = None, n: int = 1,
                    **sampling: Any) -> list[Completion]:
        return self.chat(messages, tools=tools, response_format=response_format, n=n, **sampling)


_TOKEN = re.compile(r"\w+")


class CrashOnceLLM:
    """Wraps an LLM; its ``at_call``-th call in a process kills that process (``os._exit``) if
    ``marker`` does not exist yet (it is created first), so exactly one worker dies in a run."""

    def __init__(self, inner: Any, marker: str, at_call: int = 1) -> None:
        self.inner, self.marker, self.at_call = inner, str(marker), at_call
        self.model = getattr(inner, "model", "crash-once")
        self.calls = 0
        self._lock = threading.Lock()

    def _maybe_die(self) -> None:
        import os

        with self._lock:
            self.calls += 1
            if self.calls != self.at_call:
                return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(17)

    def chat(self, messages: list[Message], **kwargs: Any) -> list[Completion]:
        self._maybe_die()
        return list(self.inner.chat(messages, **kwargs))

    async def achat(self, messages: list[Message], **kwargs: Any) -> list[Completion]:
        return self.chat(messages, **kwargs)


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
    body that is not JSON), ``"truncated"`` (a 200 whose body stops halfway, then the connection
    closes), ``"garbage"`` (200 with random bytes), ``"null_choice"`` (200 with
    ``"choices": [null]``), ``"bad_message"`` (a choice whose message is a string), ``"ok"``;
    configuration errors ``"401"``, ``"403"``, ``"404"`` (unknown model); ``"context"`` (a 400 saying
    the request is over the context window); and wrong-shaped 200 bodies (:attr:`BAD_BODIES`):
    ``"tool_name_null"``, ``"tool_args_list"`` (arguments ``"[1,2]"``), ``"int_id"`` (an integer
    tool-call id), ``"usage_str"`` (token counts as strings), ``"unknown_role"``, ``"no_message"``,
    ``"empty_message"`` and ``"content_null"`` (no text and no tool call). ``"429@V"`` and
    ``"503@V"`` answer that status with the header ``Retry-After: V``; ``V`` of the form ``date+S``
    is sent as the HTTP date ``S`` seconds from now. ``times`` holds each request's arrival
    (``time.monotonic()``).
    Once ``faults`` runs out, a request is answered with a random fault of ``fault_kinds`` with
    probability ``fault_rate`` (seeded by ``seed``, so a run at concurrency 1 is reproducible),
    else with ``reply`` (a text, a dict used as the assistant message, or a function of the
    request body returning either) after ``latency`` seconds. ``kill_client_at=N`` SIGKILLs the
    process that sent the N-th request (found by its TCP port), once, to kill a worker mid-call.
    ``requests`` counts requests; ``bodies`` keeps their JSON; ``injected`` lists the faults
    served. With ``upstream`` (a base URL such as ``agentrag llm serve``'s ``http://host:port/v1``)
    it is a fault-injecting proxy: a request that draws no fault is forwarded there and the
    upstream's status and body are relayed. Use as a context manager.
    """

    FAULT_KINDS = ("500", "stall", "malformed", "garbage", "null_choice", "bad_message")
    #: 200 replies whose body is not a valid completion (each must be retried, then be an outage)
    BAD_BODIES: dict[str, dict[str, Any]] = {
        "tool_name_null": {"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": None, "arguments": "{}"}}]}},
        "tool_args_list": {"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "[1,2]"}}]}},
        "int_id": {"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": 7, "type": "function", "function": {"name": "search", "arguments": "{}"}}]}},
        "usage_str": {"message": {"role": "assistant", "content": "ok"},
                      "usage": {"prompt_tokens": "5", "completion_tokens": "3", "total_tokens": "8"}},
        "unknown_role": {"message": {"role": "wizard", "content": "ok"}},
        "no_message": {},
        "empty_message": {"message": {}},
        "content_null": {"message": {"role": "assistant", "content": None}},
    }
    #: status replies: what a wrong key, a wrong model name or an over-long request gets
    STATUS_FAULTS: dict[str, tuple[int, str]] = {
        "401": (401, "Incorrect API key provided"),
        "403": (403, "Forbidden"),
        "404": (404, "The model `stub-missing` does not exist"),
        "context": (400, "This model's maximum context length is 8192 tokens. However, you requested 9098 "
                         "tokens (9000 in the messages, 98 in the completion). Please reduce the length."),
    }

    def __init__(self, faults: Sequence[str] = (), *,
                 reply: str | dict[str, Any] | Callable[[dict[str, Any]], str | dict[str, Any]] = "ok",
                 latency: float = 0.0, stall_s: float = 5.0, kill_client_at: int | None = None,
                 fault_rate: float = 0.0, fault_kinds: Sequence[str] = FAULT_KINDS, seed: int = 0,
                 upstream: str | None = None) -> None:
        import random

        self.upstream = upstream.rstrip("/") if upstream else None
        self.fault_rate = fault_rate
        self.fault_kinds = list(fault_kinds)
        self._rng = random.Random(seed)
        self.injected: list[str] = []
        self.faults = list(faults)
        self.reply = reply
        self.latency = latency
        self.stall_s = stall_s
        self.kill_client_at = kill_client_at
        self.killed: list[int] = []
        self.requests = 0
        self.times: list[float] = []
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _fault(self, body: dict[str, Any]) -> str:
        import time

        with self._lock:
            self.requests += 1
            self.times.append(time.monotonic())
            self.bodies.append(body)
            if self.requests == self.kill_client_at:
                return "kill"
            if self.faults:
                fault = self.faults.pop(0)
            elif self.fault_rate and self._rng.random() < self.fault_rate:
                fault = self._rng.choice(self.fault_kinds)
            else:
                fault = "ok"
            if fault != "ok":
                self.injected.append(fault)
            return fault

    def _kill_client(self, port: int) -> bool:
        """SIGKILL the local process whose TCP connection has source port ``port``."""
        import os
        import signal

        import psutil

        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.pid and conn.pid != os.getpid():
                os.kill(conn.pid, signal.SIGKILL)
                self.killed.append(conn.pid)
                return True
        return False

    def _forward(self, path: str, raw: bytes) -> tuple[int, bytes]:
        """POST ``raw`` to the upstream (``path`` below its ``/v1``); its status and body."""
        import urllib.error
        import urllib.request

        suffix = path[len("/v1"):] if path.startswith("/v1") else path
        req = urllib.request.Request(f"{self.upstream}{suffix}", data=raw, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def _response(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = self.reply(body) if callable(self.reply) else self.reply
        msg: dict[str, Any] = dict(reply) if isinstance(reply, dict) else {"content": reply}
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
            # keep-alive, as vLLM / llama.cpp servers answer: HTTP/1.0 made the client open (and the
            # stub accept) a new TCP connection per request, a cost no real endpoint has
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK wait

            def log_message(self, format: str, *args: Any) -> None:  # silence the default stderr log
                return

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
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
                if fault == "kill" and stub._kill_client(self.client_address[1]):
                    return
                if fault in stub.STATUS_FAULTS:
                    status, message = stub.STATUS_FAULTS[fault]
                    self._send(status, json.dumps({"error": {"message": message, "code": status}}).encode())
                    return
                if fault in stub.BAD_BODIES:
                    bad = stub.BAD_BODIES[fault]
                    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
                    if "message" in bad:
                        choice["message"] = bad["message"]
                    payload = {"id": "bad", "object": "chat.completion", "model": body.get("model", "stub"),
                               "choices": [choice],
                               "usage": bad.get("usage", {"prompt_tokens": 5, "completion_tokens": 3})}
                    self._send(200, json.dumps(payload).encode())
                    return
                if fault.startswith(("429@", "503@")):
                    code, value = fault.split("@", 1)
                    if value.startswith("date+"):
                        from email.utils import formatdate

                        value = formatdate(time.time() + float(value[5:]), usegmt=True)
                    self._send(int(code), json.dumps({"error": {"message": f"stub {code}"}}).encode(),
                               {"Retry-After": value})
                    return
                if fault in ("500", "429", "503", "400"):
                    self._send(int(fault), json.dumps({"error": {"message": f"stub {fault}"}}).encode())
                    return
                if fault == "stall":
                    time.sleep(stub.stall_s)
                if fault == "malformed":
                    self._send(200, b'{"choices": [ this is not json')
                    return
                if fault == "truncated":
                    whole = json.dumps(stub._response(body)).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(whole)))
                    self.end_headers()
                    self.wfile.write(whole[:len(whole) // 2])
                    self.close_connection = True
                    return
                if fault == "garbage":
                    self._send(200, bytes(range(256)) * 2)
                    return
                if fault == "null_choice":
                    self._send(200, b'{"id": "x", "choices": [null]}')
                    return
                if fault == "bad_message":
                    self._send(200, b'{"id": "x", "choices": [{"index": 0, "message": "oops"}]}')
                    return
                if stub.latency:
                    time.sleep(stub.latency)
                if stub.upstream:
                    self._send(*stub._forward(self.path, raw))
                    return
                self._send(200, json.dumps(stub._response(body)).encode())

        # listen backlog 1024: http.server's default of 5 drops connections at 32+ clients
        server = type("StubHTTPServer", (ThreadingHTTPServer,), {"request_queue_size": 1024})
        self._server = server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


class GoldDecompositionLLM:
    """A gold-data fake for EviPath: plays every EviPath role from MuSiQue's own
    ``question_decomposition`` (raw records, e.g. the lines of ``musique/train_100.jsonl``).

    It recognizes the request by its system prompt: the abductive plan (Eq. 3) lists the
    sub-questions with ``#k`` placeholders; an iteration (Eq. 4–5) asks every remaining
    sub-question whose placeholders are known (so independent ones go out in parallel), filled
    with the earlier answers, and answers when none remain; f_QA (Eq. 6) answers a sub-question
    with a sentence holding its gold answer; the executor thought selects exactly the golden
    indices it is shown. As the ``planner_executor`` agent's LLM it does the same from the
    observations it has received (deductive runs). ``calls`` counts requests.
    """

    def __init__(self, records: Sequence[dict[str, Any]], *, model: str = "gold-decomposition") -> None:
        self.model = model
        self.calls = 0
        self._lock = threading.Lock()
        self.items = []
        for rec in records:
            subs = [(self._as_question(d["question"]), str(d["answer"])) for d in rec["question_decomposition"]]
            self.items.append({"question": rec["question"], "answer": str(rec["answer"]), "subs": subs})

    @staticmethod
    def _as_question(text: str) -> str:
        text = text.strip()
        if ">>" in text:
            subject, relation = (p.strip() for p in text.split(">>", 1))
            text = f"What is the {relation} of {subject}?"
        text = text[:1].upper() + text[1:]
        return text if text.endswith("?") else text.rstrip(" .") + "?"

    @staticmethod
    def _fill(question: str, answers: Sequence[str]) -> str:
        filled = re.sub(r"#(\d+)", lambda m: answers[int(m.group(1)) - 1], question)
        return re.sub(r"\s+\?$", "?", filled)

    def _item(self, text: str) -> dict[str, Any]:
        for it in self.items:
            if f"Question: {it['question']}" in text:
                return it
        raise LLMError("GoldDecompositionLLM: no known question in the request", is_retryable=False)

    def _batches(self, item: dict[str, Any]) -> list[list[int]]:
        """Rounds of sub-question indices: each round holds those whose placeholders are known."""
        done: set[int] = set()
        rounds = []
        while len(done) < len(item["subs"]):
            ready = [k for k, (q, _) in enumerate(item["subs"]) if k not in done
                     and all(int(j) - 1 in done for j in re.findall(r"#(\d+)", q))]
            if not ready:
                break
            rounds.append(ready)
            done.update(ready)
        return rounds

    def _step(self, item: dict[str, Any], n_done: int) -> str:
        answers = [a for _, a in item["subs"]]
        rounds = self._batches(item)
        if n_done >= len(rounds):
            return (f"<think>All sub-questions are answered, so the answer to the question follows: "
                    f"{answers[rounds[-1][-1]]}.</think>\n<answer>{item['answer']}</answer>")
        qs = [self._fill(item["subs"][k][0], answers) for k in rounds[n_done]]
        known = "; ".join(f"#{k + 1} is {answers[k]}" for r in rounds[:n_done] for k in r)
        thought = (f"Known so far: {known}. " if known else "Start with the first facts. ") + \
            f"Now I can ask {len(qs)} sub-question(s) with full names."
        return f"<think>{thought}</think>\n<action>\n" + "\n".join(f'Search("{q}")' for q in qs) + "\n</action>"

    def _answer_of(self, question: str) -> str:
        for it in self.items:
            answers = [a for _, a in it["subs"]]
            for q, a in it["subs"]:
                if self._fill(q, answers) == question:
                    return a
        return "unknown"

    def _reply(self, messages: list[Message]) -> str:
        from agentrag.agents.pe_protocol import EXECUTOR_SYSTEM, PLANNER_SYSTEM
        from agentrag.synth.evipath.answering import QA_SYSTEM, THINK_SYSTEM
        from agentrag.synth.evipath.planning import PLAN_SYSTEM, STEP_SYSTEM
        from agentrag.synth.verifier import CHECKS
        from agentrag.synth.verifier import SYSTEM as VERIFIER_SYSTEM

        system = messages[0].content if messages and messages[0].role == "system" else ""
        user = "\n".join(m.content or "" for m in messages if m.role == "user")
        last = messages[-1].content or ""
        if system == PLAN_SYSTEM:
            item = self._item(user)
            return "\n".join(f"{k}. {q}" for k, (q, _) in enumerate(item["subs"], start=1))
        if system == STEP_SYSTEM:
            item = self._item(user)
            return self._step(item, len(re.findall(r"^Step \d+ thought:", user, flags=re.MULTILINE)))
        if system == PLANNER_SYSTEM:
            return self._step(self._item(user), sum(1 for m in messages if m.role == "user"
                                                    and (m.content or "").startswith("Observation:")))
        if system in (QA_SYSTEM, EXECUTOR_SYSTEM):
            q = next(line[len("Question: "):] for line in last.splitlines() if line.startswith("Question: "))
            sentence = f'The answer to "{q}" is {self._answer_of(q)}.'
            return sentence if system == QA_SYSTEM else f"<think>Looking for: {q}</think>\n<select>[0]</select>\n<answer>{sentence}</answer>"
        if system == THINK_SYSTEM:
            gold = last.split("Golden evidence:", 1)[1]
            idx = sorted({int(i) for i in re.findall(r"^\[(\d+)\]", gold, flags=re.MULTILINE)})
            am = re.search(r"^Answer: (.*)$", last, flags=re.MULTILINE)
            qm = re.search(r"^Question: (.*)$", last, flags=re.MULTILINE)
            return (f"<think>The question asks: {qm.group(1) if qm else ''} Evidence {idx} states it."
                    f"</think>\n<select>{idx}</select>\n<answer>{am.group(1) if am else ''}</answer>")
        if system == VERIFIER_SYSTEM:  # the gates' verifier: on gold data every checked statement keeps the item
            keep_if = next((c.keep_if for c in CHECKS.values() if c.statement.split("{", 1)[0][:40] in last), True)
            return json.dumps({"holds": keep_if, "reason": "gold data"})
        raise LLMError("GoldDecompositionLLM: unknown request (system prompt not an EviPath role)", is_retryable=False)

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        with self._lock:
            self.calls += 1
        text = self._reply(list(messages))
        usage = Usage(prompt_tokens=sum(len((m.content or "").split()) for m in messages),
                      completion_tokens=len(text.split()), calls=1)
        return [Completion(text=text, finish_reason="stop", usage=usage) for _ in range(n)]

    async def achat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    response_format: dict[str, Any] | None = None, n: int = 1,
                    **sampling: Any) -> list[Completion]:
        return self.chat(messages, tools=tools, response_format=response_format, n=n, **sampling)


def recombined_corpus(n: int, sources: Sequence[str], *, seed: int = 0, words: int = 100
                      ) -> Iterator[dict[str, str]]:
    """``n`` FlashRAG-format passages (``{"id", "contents": '"Title"\\ntext'}``) made of real
    sentences, deterministically: the sentences and titles of the ``sources`` corpus files
    (``{title, text}`` jsonl) are pooled; passage i takes the title of a random source passage with
    suffix ``i // 7`` (about 7 passages per title, as in wiki-18) and random sentences until it
    has ``words`` words (wiki-18's 100-word passages). Used by the scale test and benchmark."""
    import json
    import random

    titles: list[str] = []
    sentences: list[str] = []
    for path in sources:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                obj = json.loads(line)
                titles.append(str(obj.get("title", "")))
                sentences.extend(s.strip() + "." for s in str(obj["text"]).split(". ") if s.strip())
    rng = random.Random(seed)
    for i in range(n):
        title = f"{titles[rng.randrange(len(titles))]} {i // 7}"
        parts: list[str] = []
        count = 0
        while count < words:
            s = sentences[rng.randrange(len(sentences))]
            parts.append(s)
            count += len(s.split())
        yield {"id": str(i), "contents": f'"{title}"\n{" ".join(parts)}'}


__all__ = ["CrashOnceLLM", "ScriptedLLM", "OutageLLM", "FakeRetriever", "HashEmbedder", "ScriptItem",
           "StubOpenAIServer", "chatml_byte_tokenizer", "GoldDecompositionLLM", "recombined_corpus"]
