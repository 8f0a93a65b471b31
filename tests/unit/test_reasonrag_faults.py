"""ReasonRAG under the one failure policy, through a fault-injecting OpenAI-compatible HTTP stub:
a 401/404 stops the run with nothing written as finished (exit 2), an outage leaves the question
unfinished (exit 3) and a rerun continues it, a request over the context window is data, a bug
is raised as SynthBugs (exit 1); plus the driver's metrics (funnel, ``llm``) and the CLI summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_reasonrag_pipeline import QUESTION, fork_seed, policy, retriever
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.errors import (
    EXIT_BAD_INPUT,
    EXIT_BUG,
    EXIT_UNFINISHED,
    ContextLimitError,
    EndpointError,
    LLMError,
)
from agentrag.llm import resolve_llm
from agentrag.records import Message
from agentrag.synth.driver import SynthBugs
from agentrag.synth.reasonrag import ReasonRagRunConfig, run_reasonrag
from agentrag.testing import FakeRetriever, ScriptedLLM, StubOpenAIServer

SETS = ["concurrency=1", "mcts.iterations=4", "mcts.max_children=2", "mcts.max_iter=4", "mcts.top_k=1",
        "value.rollouts=1"]


def reply(body: dict[str, Any]) -> str:
    """The stub model: the scripted ReasonRAG policy of test_reasonrag_pipeline, over HTTP."""
    messages = [Message(role=m["role"], content=m.get("content")) for m in body["messages"]]
    return policy(messages, seed=body.get("seed"))


@pytest.fixture(autouse=True)
def fake_kb(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--kb fake`` resolves to the test world's two passages."""
    import agentrag.kb

    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: retriever())


def llm_yaml(tmp: Path, url: str) -> Path:
    path = tmp / f"llm-{abs(hash(url))}.yaml"
    path.write_text(f"backend: openai\nmodel: stub\nbase_url: {url}\nmax_retries: 0\ntimeout: 5\n"
                    "backoff_initial: 0\nbackoff_max: 0\n")
    return path


def cli(tmp: Path, url: str, *extra: str) -> Any:
    data = tmp / "q.jsonl"
    data.write_text(json.dumps(QUESTION.model_dump(include={"id", "question", "golden_answers"})) + "\n")
    sets = [x for s in [*SETS, f"seed={fork_seed()}"] for x in ("--set", s)]
    return CliRunner().invoke(app, ["synth", "reasonrag", "--dataset", str(data), "--kb", "fake", "--llm",
                                    str(llm_yaml(tmp, url)), "--out", str(tmp / "run"), *sets, *extra])


def records(run: Path, stage: str) -> list[dict[str, Any]]:
    path = run / f"{stage}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


@pytest.mark.parametrize("fault", ["401", "404"])
def test_endpoint_error_stops_the_run_nothing_finished_and_a_healthy_rerun_makes_calls(tmp_path, fault):
    with StubOpenAIServer(faults=[fault], reply=reply) as bad:
        res = cli(tmp_path, bad.base_url)
    assert res.exit_code == EXIT_BAD_INPUT, res.output
    run = tmp_path / "run"
    assert not records(run, "trees") and not records(run, "pairs") and not (run / "dpo").exists()
    assert not records(run, "events") and not records(run, "greedy")
    with StubOpenAIServer(reply=reply) as healthy:
        res = cli(tmp_path, healthy.base_url)
        assert res.exit_code == 0, res.output
        assert healthy.requests > 0
    assert len(records(run, "trees")) == 1 and records(run, "trees")[0]["status"] == "done"


def test_endpoint_error_from_python_raises(tmp_path):
    cfg = ReasonRagRunConfig.model_validate({"seed": fork_seed(), "mcts": {"iterations": 2}})
    with StubOpenAIServer(faults=["401"], reply=reply) as bad:
        llm = resolve_llm(f"openai:stub@{bad.base_url}", max_retries=0)
        with pytest.raises(EndpointError):
            run_reasonrag(cfg, tmp_path / "run", llm=llm, retriever=retriever(), questions=[QUESTION])
    assert not records(tmp_path / "run", "trees") and not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.parametrize("fault", ["500", "no_message", "content_null", "usage_str"])
def test_outage_leaves_the_question_unfinished_and_a_rerun_continues_it(tmp_path, fault):
    with StubOpenAIServer(faults=["ok"] * 3 + [fault], reply=reply) as flaky:
        res = cli(tmp_path, flaky.base_url)
    assert res.exit_code == EXIT_UNFINISHED, res.output
    assert "unfinished" in res.output and "[yellow]" not in res.output
    run = tmp_path / "run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["unfinished"] == 1 and list(metrics["unfinished_items"]) == ["q1"]
    assert metrics["unfinished_by_stage"] == {"mcts": 1} and metrics["bugs"] == 0
    kept = {e["id"] for e in records(run, "events")}
    assert kept and not records(run, "trees") and not records(run, "pairs")
    with StubOpenAIServer(reply=reply) as healthy:
        res = cli(tmp_path, healthy.base_url)
        assert res.exit_code == 0, res.output
        assert healthy.requests > 0
    assert kept < {e["id"] for e in records(run, "events")}  # continued, not restarted
    assert len(records(run, "trees")) == 1 and json.loads((run / "metrics.json").read_text())["unfinished"] == 0


def test_context_limit_is_data_not_unfinished(tmp_path):
    with StubOpenAIServer(faults=["context"], reply=reply) as srv:
        res = cli(tmp_path, srv.base_url)
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    errors = [e for e in records(run, "events") if e["outcome"] == "error"]
    assert errors and errors[0]["reason"].startswith("context_limit")
    assert len(records(run, "trees")) == 1
    assert json.loads((run / "metrics.json").read_text())["unfinished"] == 0


def _fails_at(n: int, exc: Exception) -> Any:
    """The scripted policy, except that its ``n``-th call raises ``exc``."""
    calls = [0]

    def answer(messages: list[Message], **kw: object) -> Any:
        calls[0] += 1
        return exc if calls[0] == n else policy(messages, **kw)

    return answer


@pytest.mark.parametrize("kind", ["endpoint", "outage", "context", "greedy_outage"])
def test_failure_policy_in_process(tmp_path, kind):
    """The same policy on in-process fakes (independent of how the HTTP backend classifies)."""
    cfg = ReasonRagRunConfig.model_validate({"seed": fork_seed(), "mcts": {"iterations": 4, "top_k": 1}})
    exc = {"endpoint": EndpointError("HTTP 401 from stub: check the API key", status=401),
           "outage": LLMError("HTTP 503", is_retryable=True), "greedy_outage": LLMError("HTTP 503", is_retryable=True),
           "context": ContextLimitError("over the context window")}[kind]
    run = tmp_path / "run"
    if kind == "greedy_outage":  # the search finishes; the baseline's first call fails
        full = ScriptedLLM(default=policy)
        run_reasonrag(cfg.model_copy(update={"greedy_baseline": False}), tmp_path / "probe", llm=full,
                      retriever=retriever(), questions=[QUESTION])
        llm = ScriptedLLM(default=_fails_at(full.calls + 1, exc))
    else:
        llm = ScriptedLLM(default=_fails_at({"endpoint": 3, "outage": 8, "context": 1}[kind], exc))
    if kind == "endpoint":
        with pytest.raises(EndpointError):
            run_reasonrag(cfg, run, llm=llm, retriever=retriever(), questions=[QUESTION])
        assert not records(run, "trees") and not records(run, "pairs") and not (run / "metrics.json").exists()
        return
    m = run_reasonrag(cfg, run, llm=llm, retriever=retriever(), questions=[QUESTION])
    if kind == "context":
        assert m["unfinished"] == 0 and len(records(run, "trees")) == 1
        assert any((e.get("reason") or "").startswith("context_limit") for e in records(run, "events"))
    elif kind == "outage":
        assert m["unfinished_by_stage"] == {"mcts": 1} and not records(run, "trees") and records(run, "events")
    else:
        assert m["unfinished_by_stage"] == {"greedy": 1} and len(records(run, "trees")) == 1
        assert not records(run, "greedy")
        m2 = run_reasonrag(cfg, run, llm=ScriptedLLM(default=policy), retriever=retriever(), questions=[QUESTION])
        assert m2["unfinished"] == 0 and len(records(run, "greedy")) == 1


class BuggyRetriever(FakeRetriever):
    def search(self, queries: list[str], top_k: int) -> Any:
        raise KeyError("a bug in the retriever")


def test_a_bug_is_synthbugs_and_exit_1(tmp_path, monkeypatch):
    cfg = ReasonRagRunConfig.model_validate({"seed": fork_seed(), "mcts": {"iterations": 4, "top_k": 1}})
    with StubOpenAIServer(reply=reply) as srv:
        llm = resolve_llm(f"openai:stub@{srv.base_url}", max_retries=0)
        with pytest.raises(SynthBugs) as info:
            run_reasonrag(cfg, tmp_path / "py", llm=llm, retriever=BuggyRetriever([]), questions=[QUESTION])
        assert "q1" in info.value.bugs
        metrics = json.loads((tmp_path / "py" / "metrics.json").read_text())
        assert metrics["bugs"] == 1 and metrics["unfinished"] == 1 and not records(tmp_path / "py", "trees")
        import agentrag.kb

        monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: BuggyRetriever([]))
        res = cli(tmp_path, srv.base_url)
    assert res.exit_code == EXIT_BUG, res.output


def test_metrics_shape_funnel_and_llm_in_metrics_and_report(tmp_path):
    with StubOpenAIServer(reply=reply) as srv:
        res = cli(tmp_path, srv.base_url)
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    m = json.loads((run / "metrics.json").read_text())
    assert m["synthesizer"] == "reasonrag" and m["unfinished"] == 0 and m["bugs"] == 0 and m["wall_s"] >= 0
    assert [r["stage"] for r in m["funnel"]] == ["questions", "mcts", "greedy", "pairs", "dpo"]
    rows = {r["stage"]: r for r in m["funnel"]}
    assert rows["questions"]["in"] == rows["mcts"]["in"] == 1 and rows["mcts"]["out"] == 1
    assert rows["pairs"]["out"] == m["pairs"] > 0 and rows["dpo"]["out"] == m["pairs"]
    assert rows["pairs"]["in"] == rows["pairs"]["out"] + sum(rows["pairs"]["rejected"].values())
    assert set(rows["pairs"]["rejected"]) <= {"answerless", "flagged", "same_response", "same_action", "min_gap"}
    assert "llm_cache" not in m and "elapsed" not in m
    assert list(m["llm"]) == ["policy+judge"] and m["llm"]["policy+judge"]["misses"] > 0
    assert m["llm_calls"]["total"] > 0 and m["llm_calls"]["by_question"]["q1"] > 0  # per-question counts
    report = (run / "report.md").read_text()
    assert "Funnel" in report and "LLM usage" in report and "policy+judge" in report
    assert str(run / "dpo" / "trl_dpo.jsonl") in "".join(res.output.split())  # the console wraps long lines


def test_no_pair_no_dpo_path_printed(tmp_path):
    with StubOpenAIServer(reply=reply) as srv:
        res = cli(tmp_path, srv.base_url, "--set", "pairs.min_gap=2")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "trl_dpo.jsonl" not in out and "no DPO export: no preference pair passed the filters" in out
    assert not (tmp_path / "run" / "dpo" / "trl_dpo.jsonl").exists()
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["pairs"] == 0 and {r["stage"]: r for r in m["funnel"]}["pairs"]["rejected"]["min_gap"] > 0
