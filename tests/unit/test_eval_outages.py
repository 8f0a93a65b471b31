"""Outages are not answers (issue 9 item 4): a real retrieval server stopped mid-run, and an
OpenAI-compatible stub injecting faults (500s, stalls, garbage, wrong shapes) at ~20 %."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import httpx
import pytest

from agentrag.agents import build_agent
from agentrag.agents.prompts import PLAN_USER
from agentrag.errors import RetrievalError, UserError
from agentrag.eval.runner import evaluate, summarize
from agentrag.kb.remote import RemoteRetriever
from agentrag.kb.server import create_app
from agentrag.llm.openai_backend import OpenAIBackend
from agentrag.records import Message, Passage, QAItem, ToolCall
from agentrag.runs import RunDir
from agentrag.testing import FakeRetriever, ScriptedLLM, StubOpenAIServer

PASSAGES = [Passage(id=f"p{i}", title=f"City {i}", text=f"City {i} is the capital of country {i}.") for i in range(8)]


def items(n: int) -> list[QAItem]:
    return [QAItem(id=f"q{i}", question=f"What is the capital of country {i}?", golden_answers=[f"City {i}"], hops=1)
            for i in range(n)]


def plan_step_policy(messages: list[Message], **kwargs: Any) -> object:
    """A plan_step model: plan, one search, then the answer read from the question."""
    if not kwargs.get("tools"):
        return "1. search the capital"
    n = messages[1].content.split("country ")[1].split("?")[0]
    if messages[-2].role == "tool":
        return ToolCall(name="Final_Answer", arguments={"answer": f"City {n}"})
    return ToolCall(name="RAG_search", arguments={"query": f"capital of country {n}", "topk": 2})


class ServerThread:
    """agentrag's FastAPI retrieval server (or another ``app``) under uvicorn on 127.0.0.1, in a thread."""

    def __init__(self, retriever: Any, app: Any = None) -> None:
        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(app or create_app(retriever), host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("retrieval server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def remote(url: str) -> RemoteRetriever:
    return RemoteRetriever(url, timeout=2, max_retries=2, backoff_initial=0.01, backoff_max=0.05)


def test_stopping_the_retrieval_server_mid_run_leaves_items_unfinished(tmp_path):
    qs = items(6)
    first = ServerThread(FakeRetriever(PASSAGES)).start()
    retriever = remote(first.url)
    assert retriever.health()["status"] == "ok"
    agent = build_agent("plan_step", ScriptedLLM(default=plan_step_policy), retriever)
    done: list[str] = []

    def on_result(res: Any) -> None:
        if res is not None:
            done.append(res.id)
        if len(done) == 2 and first.thread.is_alive():
            first.stop()

    results = evaluate(agent, qs, tmp_path, concurrency=1, on_result=on_result)
    unfinished = json.loads((tmp_path / "unfinished.json").read_text())
    assert len(results) >= 2 and len(unfinished) >= 3
    assert {r.id for r in results} | set(unfinished) == {q.id for q in qs}
    assert all(r.correct for r in results)  # nothing unfinished was scored as a wrong answer
    assert all(v.startswith("RetrievalError") and "gave up after 3 attempts" in v for v in unfinished.values())
    m = summarize(results, n_requested=6, unfinished=unfinished)
    assert m["n"] == len(results) and m["em"] == 1.0 and m["unfinished_reasons"] == {"RetrievalError": len(unfinished)}
    with pytest.raises(UserError, match="GET /health"):
        retriever.health()

    second = ServerThread(FakeRetriever(PASSAGES)).start()
    try:
        llm = ScriptedLLM(default=plan_step_policy)
        rerun = evaluate(build_agent("plan_step", llm, remote(second.url)), qs, tmp_path, concurrency=1)
    finally:
        second.stop()
    rerun_questions = {r["messages"][1].content for r in llm.requests}
    assert rerun_questions == {PLAN_USER.format(question=q.question) for q in qs if q.id in unfinished}  # exactly those
    assert len(rerun) == 6 and all(r.correct for r in rerun)
    assert json.loads((tmp_path / "unfinished.json").read_text()) == {}


@pytest.mark.parametrize("payload", [
    {"result": [None]}, {"result": [[{"document": None, "score": 1}]]}, {"choices": []}, [1, 2],
])
def test_remote_wrong_shapes_are_retryable(payload):
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(200, json=payload)
        return httpx.Response(200, json={"result": [[{"document": {"id": "d", "contents": "T\ntext"}, "score": 1.0}]]})

    r = RemoteRetriever("http://kb", client=httpx.Client(transport=httpx.MockTransport(handler)),
                        backoff_initial=0.01)
    assert r.search(["q"], 1)[0][0].id == "d" and r.attempts == 2


def test_remote_server_5xx_after_retries_is_an_outage():
    r = RemoteRetriever("http://kb", client=httpx.Client(transport=httpx.MockTransport(
        lambda req: httpx.Response(503, text="busy"))), max_retries=1, backoff_initial=0.01)
    with pytest.raises(RetrievalError) as e:
        r.search(["q"], 1)
    assert e.value.is_retryable and r.attempts == 2


def stub_reply(body: dict[str, Any]) -> dict[str, Any] | str:
    """The stub model: plan (no tools), a search, then the answer."""
    if not body.get("tools"):
        return "1. search the capital"
    msgs = body["messages"]
    n = msgs[1]["content"].split("country ")[1].split("?")[0]
    if msgs[-2]["role"] == "tool":
        call = {"name": "Final_Answer", "arguments": json.dumps({"answer": f"City {n}"})}
    else:
        call = {"name": "RAG_search", "arguments": json.dumps({"query": f"capital of country {n}", "topk": 2})}
    return {"tool_calls": [{"id": "c1", "type": "function", "function": call}]}


def test_fault_injecting_llm_server_leaves_failed_items_unfinished_and_rerun_finishes_them(tmp_path):
    qs = items(8)
    retriever = FakeRetriever(PASSAGES)
    with StubOpenAIServer(reply=stub_reply, fault_rate=0.2, stall_s=0.6, seed=3) as srv:
        llm = OpenAIBackend("stub", base_url=srv.base_url, timeout=0.3, max_retries=1, backoff_initial=0.0,
                            backoff_max=0.0)
        results = evaluate(build_agent("plan_step", llm, retriever), qs, tmp_path, concurrency=1)
        injected = set(srv.injected)
    unfinished = json.loads((tmp_path / "unfinished.json").read_text())
    assert {"500", "stall", "garbage", "null_choice", "malformed", "bad_message"} & injected
    assert unfinished and results  # the run completed, with some items unfinished
    assert {r.id for r in results} | set(unfinished) == {q.id for q in qs}
    assert all(r.correct and r.finish_reason == "answered" for r in results)
    assert all("LLM call to" in v for v in unfinished.values())
    m = summarize(results, n_requested=8, unfinished=unfinished)
    assert m["unfinished"] == len(unfinished) and m["em"] == 1.0

    with StubOpenAIServer(reply=stub_reply) as healthy:
        llm = OpenAIBackend("stub", base_url=healthy.base_url, timeout=2, max_retries=0)
        rerun = evaluate(build_agent("plan_step", llm, retriever), qs, tmp_path, concurrency=1)
        asked = {b["messages"][1]["content"] for b in healthy.bodies}
    assert asked == {PLAN_USER.format(question=q.question) for q in qs if q.id in unfinished}
    assert len(rerun) == 8 and json.loads((tmp_path / "unfinished.json").read_text()) == {}


def test_fault_injecting_proxy_in_front_of_llm_serve(tmp_path):
    """`agentrag llm serve`'s app (uvicorn, a deterministic plan_step model behind it) reached
    through a proxy that injects 500s, stalls, garbage and wrong shapes at 20 %."""
    from agentrag.llm.server import create_app as llm_app

    qs = items(10)
    retriever = FakeRetriever(PASSAGES)
    model = ScriptedLLM(default=plan_step_policy)
    served = ServerThread(None, app=llm_app(model)).start()
    try:
        with StubOpenAIServer(upstream=f"{served.url}/v1", fault_rate=0.2, stall_s=0.6, seed=5) as proxy:
            llm = OpenAIBackend("served", base_url=proxy.base_url, timeout=0.4, max_retries=1,
                                backoff_initial=0.0, backoff_max=0.0)
            results = evaluate(build_agent("plan_step", llm, retriever), qs, tmp_path, concurrency=1)
            injected = set(proxy.injected)
        unfinished = json.loads((tmp_path / "unfinished.json").read_text())
        assert len(injected) >= 2  # several kinds of fault fired
        assert unfinished and results  # the run completed, with some items unfinished
        assert {r.id for r in results} | set(unfinished) == {q.id for q in qs}
        assert all(r.correct and r.finish_reason == "answered" for r in results)
        assert all("LLM call to" in v for v in unfinished.values())

        before = len(model.requests)
        llm = OpenAIBackend("served", base_url=f"{served.url}/v1", timeout=5, max_retries=0)
        rerun = evaluate(build_agent("plan_step", llm, retriever), qs, tmp_path, concurrency=1)
        asked = {r["messages"][1].content for r in model.requests[before:]}
        assert asked == {PLAN_USER.format(question=q.question) for q in qs if q.id in unfinished}
        assert len(rerun) == 10 and json.loads((tmp_path / "unfinished.json").read_text()) == {}
    finally:
        served.stop()


@pytest.mark.parametrize("fault", ["null_choice", "bad_message", "garbage"])
def test_wrong_shaped_200_reply_is_a_retryable_parse_error(fault):
    with StubOpenAIServer([fault], reply="hello") as srv:
        llm = OpenAIBackend("stub", base_url=srv.base_url, timeout=2, max_retries=1, backoff_initial=0.0)
        assert llm.chat([Message(role="user", content="hi")])[0].text == "hello" and llm.attempts == 2


def test_an_llm_outage_is_never_scored(tmp_path):
    from agentrag.errors import LLMError

    llm = ScriptedLLM(["plan", LLMError("connection refused after 5 attempts", is_retryable=True)],
                     default=plan_step_policy)
    results = evaluate(build_agent("plan_step", llm, FakeRetriever(PASSAGES)), items(2), tmp_path, concurrency=1)
    unfinished = json.loads((tmp_path / "unfinished.json").read_text())
    assert [r.id for r in results] == ["q1"] and list(unfinished) == ["q0"]
    assert RunDir(tmp_path).stage_file("results", type(results[0])).read() == results
