"""`agentrag eval` under the one failure policy (issue 20), through OpenAI-compatible stub servers
over HTTP and agentrag's own retrieval server: outages leave items unfinished (exit 3), a
401/403/404 stops the run (exit 2), a bug exits 1, a request over the context window is a flagged
wrong answer, an unwritable or full --out is a one-line error, and a second writer is refused."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_eval_outages import PASSAGES, ServerThread, stub_reply
from typer.testing import CliRunner

import agentrag.kb
import agentrag.llm
from agentrag.cli.main import app
from agentrag.runs import JsonlStore
from agentrag.testing import FakeRetriever, StubOpenAIServer

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def dataset(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is the capital of country {i}?",
                                        "golden_answers": [f"City {i}"]}) + "\n" for i in range(n)))
    return path


def llm_yaml(tmp_path: Path, name: str, url: str, max_retries: int = 1) -> Path:
    """An LLM reference (a YAML file) for a stub: short timeout, tiny backoff, ``max_retries``."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"backend: openai\nmodel: stub\nbase_url: {url}\ntimeout: 3\nmax_retries: {max_retries}\n"
                    "backoff_initial: 0.0\nbackoff_max: 0.0\n")
    return path


def judge_reply(body: dict[str, Any]) -> str:
    return '{"reason": "same", "score": 2}'


@pytest.fixture()
def fake_kb(monkeypatch):
    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(PASSAGES), raising=False)


def eval_args(data: Path, out: Path, llm: Path | str, *extra: str) -> list[str]:
    return ["eval", "--dataset", str(data), "--kb", "kbdir", "--agent", "plan_step", "--llm", str(llm),
            "-j", "1", "--out", str(out), *extra]


def results(out: Path) -> list[dict[str, Any]]:
    path = out / "results.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def one_error_line(output: str) -> str:
    assert "Traceback" not in output, output
    lines = [x for x in output.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, output
    return " ".join(output[output.index("error:"):].split())


@pytest.mark.parametrize("body", sorted(StubOpenAIServer.BAD_BODIES))
def test_a_200_that_is_no_completion_is_retried_then_unfinished_never_scored_never_cached(tmp_path, fake_kb, body):
    data, out = dataset(tmp_path, 2), tmp_path / "run"
    with StubOpenAIServer([body, body], reply=stub_reply) as srv:  # both attempts of q0's first call
        res = runner.invoke(app, eval_args(data, out, llm_yaml(tmp_path, "agent", srv.base_url)))
        assert srv.injected == [body, body]
    assert res.exit_code == 3, res.output
    assert [r["id"] for r in results(out)] == ["q1"]
    assert list(json.loads((out / "unfinished.json").read_text())) == ["q0"]
    with StubOpenAIServer(reply=stub_reply) as healthy:  # the rerun asks the server again: nothing was cached
        res = runner.invoke(app, eval_args(data, out, llm_yaml(tmp_path, "agent", healthy.base_url)))
        asked = {b["messages"][1]["content"] for b in healthy.bodies}
    assert res.exit_code == 0, res.output
    assert len(asked) == 1 and "country 0" in asked.pop()
    assert sorted(r["id"] for r in results(out)) == ["q0", "q1"] and all(r["em"] == 1.0 for r in results(out))


@pytest.mark.parametrize("status", ["401", "403", "404"])
def test_an_endpoint_error_of_the_agent_llm_stops_the_eval(tmp_path, fake_kb, status):
    data, out = dataset(tmp_path), tmp_path / "run"
    with StubOpenAIServer([status], reply=stub_reply) as srv:
        res = runner.invoke(app, eval_args(data, out, llm_yaml(tmp_path, "agent", srv.base_url)))
        assert srv.requests == 1  # stopped at the first one, not retried, no other item started
    assert res.exit_code == 2, res.output
    assert srv.base_url.split("//")[1].split("/")[0] in one_error_line(res.output)  # names the endpoint
    assert results(out) == []


@pytest.mark.parametrize("status", ["401", "404"])
def test_an_endpoint_error_of_the_judge_stops_the_eval(tmp_path, fake_kb, status):
    data, out = dataset(tmp_path), tmp_path / "run"
    with StubOpenAIServer(reply=stub_reply) as agent, StubOpenAIServer([status], reply=judge_reply) as judge:
        res = runner.invoke(app, eval_args(data, out, llm_yaml(tmp_path, "agent", agent.base_url),
                                           "--judge", str(llm_yaml(tmp_path, "judge", judge.base_url))))
    assert res.exit_code == 2, res.output
    assert judge.base_url.split("//")[1].split("/")[0] in one_error_line(res.output)
    assert results(out) == []


def test_a_wrong_token_for_the_retrieval_server_stops_the_eval(tmp_path, monkeypatch):
    from agentrag.kb.server import create_app

    server = ServerThread(None, app=create_app(FakeRetriever(PASSAGES), token="right")).start()
    monkeypatch.setenv("AGENTRAG_KB_TOKEN", "wrong")
    data, out = dataset(tmp_path), tmp_path / "run"
    try:
        with StubOpenAIServer(reply=stub_reply) as srv:
            args = eval_args(data, out, llm_yaml(tmp_path, "agent", srv.base_url))
            args[args.index("kbdir")] = server.url
            res = runner.invoke(app, args)
    finally:
        server.stop()
    assert res.exit_code == 2, res.output
    assert f"127.0.0.1:{server.port}" in one_error_line(res.output)
    assert results(out) == []


def test_an_endpoint_error_of_the_retriever_is_never_an_observation(tmp_path, monkeypatch):
    from agentrag.errors import EndpointError

    class Refused(FakeRetriever):
        def search(self, queries, k, threshold=None):
            raise EndpointError("retrieval server http://kb:8000 answered 401: pass the right AGENTRAG_KB_TOKEN",
                                endpoint="http://kb:8000", status=401)

    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: Refused(PASSAGES), raising=False)
    data, out = dataset(tmp_path), tmp_path / "run"
    with StubOpenAIServer(reply=stub_reply) as srv:
        res = runner.invoke(app, eval_args(data, out, llm_yaml(tmp_path, "agent", srv.base_url)))
    assert res.exit_code == 2 and "http://kb:8000" in one_error_line(res.output)
    assert results(out) == []


def test_a_judge_outage_leaves_the_judgement_pending_and_a_rerun_judges_it(tmp_path, fake_kb):
    data, out = dataset(tmp_path, 2), tmp_path / "run"
    with StubOpenAIServer(reply=stub_reply) as agent:
        agent_ref = llm_yaml(tmp_path, "agent", agent.base_url)
        with StubOpenAIServer(["500", "500"], reply=judge_reply) as judge:
            res = runner.invoke(app, eval_args(data, out, agent_ref, "--judge",
                                               str(llm_yaml(tmp_path, "judge", judge.base_url))))
        assert res.exit_code == 3, res.output
        assert [r["id"] for r in results(out)] == ["q1"]  # q0: pending, not written with judge_error
        before = agent.requests
        with StubOpenAIServer(reply=judge_reply) as judge:
            res = runner.invoke(app, eval_args(data, out, agent_ref, "--judge",
                                               str(llm_yaml(tmp_path, "judge", judge.base_url))))
            assert judge.requests == 1
        assert agent.requests == before  # the agent's calls came from the run's LLM cache
    assert res.exit_code == 0, res.output
    rows = {r["id"]: r for r in results(out)}
    assert rows["q0"]["judge"] == 2 and rows["q0"]["judge_error"] is None and rows["q0"]["correct"] is True


def test_a_request_over_the_context_window_is_a_flagged_wrong_answer(tmp_path, fake_kb):
    data, out = dataset(tmp_path, 2), tmp_path / "run"
    with StubOpenAIServer(["ok", "context"], reply=stub_reply) as srv:  # q0: plan, then over the window
        llm = llm_yaml(tmp_path, "agent", srv.base_url)
        res = runner.invoke(app, eval_args(data, out, llm))
        assert res.exit_code == 0, res.output
        rows = {r["id"]: r for r in results(out)}
        assert rows["q0"]["finish_reason"] == "context_limit" and rows["q0"]["em"] == 0.0
        assert rows["q0"]["trajectory"]["metadata"]["flagged"] == "context_limit"
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["context_limit"] == 1 and metrics["unfinished"] == 0 and metrics["n"] == 2
        before = srv.requests
        res = runner.invoke(app, eval_args(data, out, llm))  # not retried on rerun
        assert res.exit_code == 0 and srv.requests == before


def test_an_out_on_a_read_only_file_system_is_one_line(tmp_path, fake_kb, monkeypatch):
    out = tmp_path / "ro" / "run"
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        if str(self).startswith(str(tmp_path / "ro")):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    with StubOpenAIServer(reply=stub_reply) as srv:
        res = runner.invoke(app, eval_args(dataset(tmp_path), out, llm_yaml(tmp_path, "agent", srv.base_url)))
        assert srv.requests == 0
    assert res.exit_code == 2, res.output
    assert "read-only" in one_error_line(res.output)


def test_a_full_disk_mid_run_is_one_line_and_a_rerun_resumes(tmp_path, fake_kb, monkeypatch):
    data, out = dataset(tmp_path, 4), tmp_path / "run"
    real_append = JsonlStore.append
    written: list[str] = []

    def append(self: JsonlStore, record: Any) -> bool:
        if self.path.name == "results.jsonl" and len(written) >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(record.id)
        return real_append(self, record)

    with StubOpenAIServer(reply=stub_reply) as srv:
        llm = llm_yaml(tmp_path, "agent", srv.base_url)
        monkeypatch.setattr(JsonlStore, "append", append)
        res = runner.invoke(app, eval_args(data, out, llm))
        assert res.exit_code == 2, res.output
        assert "free some space" in one_error_line(res.output)
        assert [r["id"] for r in results(out)] == ["q0", "q1"]  # written before it are kept
        monkeypatch.setattr(JsonlStore, "append", real_append)
        res = runner.invoke(app, eval_args(data, out, llm))
        asked = {b["messages"][1]["content"] for b in srv.bodies[-6:]}
    assert res.exit_code == 0, res.output
    assert sorted(r["id"] for r in results(out)) == ["q0", "q1", "q2", "q3"]
    assert not any("country 0" in a or "country 1" in a for a in asked)  # resumed, not redone


def test_a_second_eval_on_the_same_out_is_refused_naming_the_first(tmp_path):
    from test_eval_outages import plan_step_policy

    from agentrag.eval.run import run_eval
    from agentrag.testing import ScriptedLLM

    data, out = dataset(tmp_path, 1), tmp_path / "run"
    entered, release = threading.Event(), threading.Event()

    def slow(messages: Any, **kwargs: Any) -> object:
        entered.set()
        release.wait(30)
        return plan_step_policy(messages, **kwargs)

    first = threading.Thread(target=run_eval, kwargs=dict(
        out=out, dataset=str(data), agent="plan_step", llm=ScriptedLLM(default=slow),
        retriever=FakeRetriever(PASSAGES), concurrency=1))
    first.start()
    server = ServerThread(FakeRetriever(PASSAGES)).start()
    try:
        assert entered.wait(30)
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        proc = subprocess.run([sys.executable, "-m", "agentrag", "eval", "--dataset", str(data), "--kb", server.url,
                               "--llm", "openai:stub@http://127.0.0.1:9/v1", "--out", str(out)],
                              capture_output=True, text=True, env=env, timeout=120)
    finally:
        release.set()
        first.join(30)
        server.stop()
    assert proc.returncode == 2, proc.stderr
    assert f"process {os.getpid()}" in " ".join(proc.stderr.split()) and "Traceback" not in proc.stderr
    assert [r["id"] for r in results(out)] == ["q0"]  # the first one finished undisturbed
