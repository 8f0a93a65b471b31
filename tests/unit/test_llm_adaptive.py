"""Concurrency for remote endpoints: the adaptive request limit (AIMD on 429/503 and timeouts) and
the link between a run's items in flight and the OpenAI backend's limit (llm/adaptive.py)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentrag.eval.run import run_eval
from agentrag.eval.runner import EvalConfig
from agentrag.llm import resolve_llm
from agentrag.llm.adaptive import (
    EMBEDDED_ITEMS_IN_FLIGHT,
    ITEMS_PER_REQUEST_SLOT,
    REMOTE_ITEMS_IN_FLIGHT,
    AdaptiveLimit,
    default_items_in_flight,
    link_request_limits,
)
from agentrag.llm.openai_backend import OpenAIBackend
from agentrag.records import Message
from agentrag.synth.driver import Pipeline, Stage, Synthesizer, SynthOutput, SynthRun, run_synthesizer
from agentrag.synth.evipath.config import EviPathRunConfig
from agentrag.synth.ragshaper.config import RagShaperRunConfig
from agentrag.synth.reasonrag.config import ReasonRagRunConfig
from agentrag.synth.tracer.config import TracerRunConfig
from agentrag.testing import FakeRetriever, ScriptedLLM, StubOpenAIServer

HI = [Message(role="user", content="hi")]
FAST = {"backoff_initial": 0.01, "backoff_max": 0.05, "max_retries": 30, "timeout": 5.0}


class CapacityServer(StubOpenAIServer):
    """A server that answers 429 to every request beyond ``capacity`` in flight (a GPU server's
    queue limit, as vLLM or a gateway in front of it behaves); ``capacity`` may change mid-run."""

    def __init__(self, capacity: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.capacity = capacity
        self.active = self.peak = self.too_many = 0

    def _fault(self, body: dict[str, Any]) -> str:
        fault = super()._fault(body)
        with self._lock:
            if fault == "ok" and self.active >= self.capacity:
                self.too_many += 1
                return "429"
            if fault == "ok":
                self.active += 1
                self.peak = max(self.peak, self.active)
        return fault

    def _response(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.active -= 1
        return super()._response(body)


def hammer(llm: OpenAIBackend, calls: int, threads: int) -> list[str]:
    with ThreadPoolExecutor(threads) as pool:
        return [c[0].text for c in pool.map(lambda _: llm.chat(HI), range(calls))]


def test_limit_halves_once_per_window_adds_one_per_window_and_stays_in_bounds(caplog):
    lim = AdaptiveLimit(8, name="http://gpu:8000/v1")
    caplog.set_level(logging.INFO, logger="agentrag.llm.adaptive")
    slots = [lim.slot() for _ in range(8)]
    held = [s.__enter__() for s in slots]  # 8 attempts started in the same window
    for s in held[:3]:
        s.overload()
    for cm in slots:
        cm.__exit__(None, None, None)
    assert lim.limit == 4 and lim.lowest == 4  # three 429s of one window: one decrease, not three
    assert "http://gpu:8000/v1: 8 -> 4 of 8" in caplog.text
    for _ in range(8):  # later windows: 3 of 4, 2 of 2 overloads halve again; never below 1
        with lim.slot() as s:
            s.overload()
    assert lim.limit == 1 and lim.lowest == 1
    for _ in range(1 + 2 + 3 + 4 + 5 + 6 + 7 + 20):  # `limit` successes per +1, capped at the configured 8
        with lim.slot():
            pass
    assert lim.limit == 8 and "7 -> 8 of 8" in caplog.text
    with lim.slot() as s:
        s.error()  # a 500 or a malformed body is no sign of overload
    assert lim.limit == 8


def test_a_full_limit_makes_the_next_attempt_wait():
    lim = AdaptiveLimit(2)
    order: list[str] = []
    a, b = lim.slot(), lim.slot()
    a.__enter__(), b.__enter__()

    def third() -> None:
        with lim.slot():
            order.append("third")

    t = threading.Thread(target=third)
    t.start()
    t.join(0.2)
    assert order == [] and lim.in_flight == 2
    order.append("release")
    a.__exit__(None, None, None)
    t.join(2)
    b.__exit__(None, None, None)
    assert order == ["release", "third"] and lim.in_flight == 0


def test_429s_from_a_saturated_server_lower_the_limit_and_it_recovers_when_they_stop(caplog):
    caplog.set_level(logging.INFO, logger="agentrag.llm.adaptive")
    with CapacityServer(4, latency=0.02, reply="fine") as stub:
        llm = OpenAIBackend("m", stub.base_url, concurrency=16, **FAST)
        assert hammer(llm, 160, 16) == ["fine"] * 160  # every 429 retried: nothing lost
        assert stub.too_many > 0 and llm.limit.lowest <= 4 and stub.peak <= 4
        low_errors = stub.too_many
        stub.capacity = 100
        assert hammer(llm, 400, 16) == ["fine"] * 400
        assert llm.limit.limit == 16 and stub.too_many == low_errors  # recovered; no new 429
    assert "requests in flight to" in caplog.text and "-> 16 of 16" in caplog.text


def test_timeouts_lower_the_limit_and_a_500_does_not():
    with StubOpenAIServer(["500"] * 4, reply="x") as stub:
        llm = OpenAIBackend("m", stub.base_url, concurrency=8, **FAST)
        assert llm.chat(HI)[0].text == "x" and llm.limit.limit == 8
    with StubOpenAIServer(["stall"] * 3, stall_s=1.0, reply="x") as stub:
        llm = OpenAIBackend("m", stub.base_url, concurrency=8, **{**FAST, "timeout": 0.3})
        assert llm.chat(HI)[0].text == "x" and llm.limit.lowest == 4 and stub.requests == 4


def test_isolated_429s_do_not_lower_the_limit():
    """A rate-limited API's background noise (two 429s in a window of 8) is retried, not a reason to slow down."""
    with StubOpenAIServer((["429", "ok", "ok", "429"] + ["ok"] * 10) * 3, reply="x") as stub:
        llm = OpenAIBackend("m", stub.base_url, concurrency=8, **FAST)
        assert [llm.chat(HI)[0].text for _ in range(36)] == ["x"] * 36
        assert stub.injected == ["429"] * 6 and llm.limit.lowest == 8


def test_adaptive_false_keeps_the_limit():
    with StubOpenAIServer(["429", "429"], reply="x") as stub:
        llm = OpenAIBackend("m", stub.base_url, concurrency=8, adaptive=False, **FAST)
        assert llm.chat(HI)[0].text == "x" and llm.limit.lowest == 8


def test_default_items_in_flight_depends_on_the_backend(tmp_path):
    assert default_items_in_flight("embedded") == EMBEDDED_ITEMS_IN_FLIGHT == 2
    assert default_items_in_flight("hf:ckpt", None) == EMBEDDED_ITEMS_IN_FLIGHT
    assert default_items_in_flight("embedded", "openai:m@http://x:8000/v1") == REMOTE_ITEMS_IN_FLIGHT == 64
    yaml = tmp_path / "llm.yaml"
    yaml.write_text("backend: openai\nmodel: m\nbase_url: http://x/v1\n")
    assert default_items_in_flight(str(yaml)) == REMOTE_ITEMS_IN_FLIGHT
    assert default_items_in_flight(resolve_llm("openai:m@http://x/v1", cache=tmp_path / "c.sqlite")) == 64
    remote = "openai:m@http://x/v1"
    assert RagShaperRunConfig().items_in_flight() == 2 and RagShaperRunConfig(teacher=remote).items_in_flight() == 64
    assert TracerRunConfig(judge=remote).items_in_flight() == 64 and TracerRunConfig().items_in_flight() == 2
    assert ReasonRagRunConfig(llm=remote).items_in_flight() == 64
    assert EviPathRunConfig(executor_llm=remote).items_in_flight() == 64
    assert EvalConfig(llm=remote).items_in_flight() == 64 and EvalConfig().items_in_flight() == 2
    assert TracerRunConfig(llm=remote, concurrency=7).items_in_flight() == 7  # the user's value wins


def test_link_follows_the_items_in_flight_unless_the_llm_config_sets_it(tmp_path, caplog):
    default = resolve_llm("openai:m@http://x/v1", cache=tmp_path / "c.sqlite")  # behind the response cache
    # an endpoint among the run's LLMs: its limit is the run's concurrency, twice as many items are in flight
    assert link_request_limits([default, None], 12) == 12 * ITEMS_PER_REQUEST_SLOT == 24
    assert default.inner.limit.maximum == 12  # type: ignore[attr-defined]
    assert link_request_limits([None, ScriptedLLM()], 12) == 12  # no endpoint: items in flight = concurrency
    yaml = tmp_path / "capped.yaml"
    yaml.write_text("backend: openai\nmodel: m\nbase_url: http://gpu:8000/v1\nconcurrency: 5\n")
    capped = resolve_llm(str(yaml))
    with caplog.at_level(logging.WARNING, logger="agentrag.llm.adaptive"):
        link_request_limits([capped], 40)
    assert capped.limit.maximum == 5  # type: ignore[attr-defined]
    assert "the run's concurrency is 40" in caplog.text and "concurrency: 5" in caplog.text
    assert "at most 5 requests" in caplog.text and "http://gpu:8000/v1" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agentrag.llm.adaptive"):
        link_request_limits([capped], 3)  # the run is the lower one: nothing to warn about
    assert capped.limit.maximum == 5 and caplog.text == ""  # type: ignore[attr-defined]


class OneCall(Synthesizer[Any, None, dict[str, Any]]):
    """A one-stage synthesizer: one LLM call per item (to see what the driver links)."""

    name = "onecall"
    stages = (Stage("ask", "items", "answers.jsonl"),)
    given = ("llm",)

    def check_inputs(self, cfg: Any, out: Any, given: Mapping[str, Any]) -> None:
        return None

    def components(self, cfg: Any, run: Any, inputs: None, given: Mapping[str, Any]) -> dict[str, Any]:
        return {"llm": given["llm"]}

    def llm_roles(self, comps: dict[str, Any]) -> dict[str, Any]:
        return {"llm": comps["llm"]}

    def pipeline(self, ctx: SynthRun, cfg: Any, comps: dict[str, Any], inputs: None) -> Pipeline:
        seen: list[str] = []

        def ask() -> None:
            ctx.stage("ask", lambda i: comps["llm"].chat(HI)[0].text, range(cfg.n),
                      on_result=lambda i, text: seen.append(text))
        return Pipeline(steps=[ask], report=lambda: SynthOutput(counts={"ask": (cfg.n, len(seen), {})},
                                                                   details={"threads": ctx.executor.workers}))

    def report_sections(self, metrics: dict[str, Any]) -> Sequence[Any]:
        return []


class Cfg(TracerRunConfig):
    n: int = 6


def test_run_synthesizer_links_the_backend_to_its_items_in_flight(tmp_path):
    with StubOpenAIServer(reply="a") as stub:
        llm = OpenAIBackend("m", stub.base_url, **FAST)
        first = run_synthesizer(OneCall(), Cfg(concurrency=3), tmp_path / "r1", llm=llm)
        # the request limit is the run's concurrency; ITEMS_PER_REQUEST_SLOT x as many items are in flight
        assert llm.limit.maximum == 3 and first["threads"] == 3 * ITEMS_PER_REQUEST_SLOT
        metrics = run_synthesizer(OneCall(), Cfg(), tmp_path / "r2", llm=llm)  # refs say embedded, object is remote
        assert llm.limit.maximum == REMOTE_ITEMS_IN_FLIGHT and metrics["funnel"][0]["out"] == 6
        assert metrics["threads"] == REMOTE_ITEMS_IN_FLIGHT * ITEMS_PER_REQUEST_SLOT
        # the backend object sits behind each run's response cache: what reached the stub is its misses
        assert stub.requests == sum(st["misses"] for m in (first, metrics) for st in m["llm"].values()) >= 2


def test_run_eval_links_the_backend_to_its_concurrency(tmp_path):
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Capital of {i}?", "golden_answers": ["x"]})
                            + "\n" for i in range(3)))
    with StubOpenAIServer(reply="x") as stub:
        llm = OpenAIBackend("m", stub.base_url, **FAST)
        metrics = run_eval(EvalConfig(dataset=str(data), agent="plan_step", concurrency=3), tmp_path / "run",
                           llm=llm, retriever=FakeRetriever([{"id": "d", "title": "t", "text": "x"}]))
        assert llm.limit.maximum == 3 and metrics["unfinished"] == 0
