"""A resumed run's files equal an uninterrupted run's byte for byte: once every item is finished,
results.jsonl is in input order and its timings (``elapsed``, ``latency``) live in
results.timings.jsonl, which reading the run puts back."""

from __future__ import annotations

import json

import pytest
from test_eval_failures import dataset, eval_args, fake_kb, llm_yaml, results  # noqa: F401
from test_eval_outages import stub_reply
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.eval.result import EvalResult
from agentrag.runs import JsonlStore, merge_volatile, split_volatile
from agentrag.testing import StubOpenAIServer

runner = CliRunner()


def test_split_and_merge_volatile_round_trip() -> None:
    obj = {"id": "a", "elapsed": 1.5, "x": {"steps": [{"latency": 0.1, "k": 1}, {"k": 2}, {"latency": 0.3}]},
           "latency": "not a number"}
    original = json.loads(json.dumps(obj))
    removed = split_volatile(obj)
    assert obj == {"id": "a", "x": {"steps": [{"k": 1}, {"k": 2}, {}]}, "latency": "not a number"}
    merge_volatile(obj, removed)
    assert obj == original


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_a_run_resumed_after_an_outage_writes_the_same_bytes(tmp_path, fake_kb, jobs):  # noqa: F811
    data = dataset(tmp_path, 5)
    with StubOpenAIServer(reply=stub_reply) as srv:
        llm = llm_yaml(tmp_path, "agent", srv.base_url)
        assert runner.invoke(app, [*eval_args(data, tmp_path / "clean", llm), "-j", jobs]).exit_code == 0

    out = tmp_path / "resumed"
    down = {"country 1?", "country 3?"}  # their items hit an outage (500 on every attempt)

    with StubOpenAIServer(reply=stub_reply) as srv:
        srv._fault = _faulting(srv, down)  # type: ignore[method-assign]
        llm = llm_yaml(tmp_path, "agent", srv.base_url)
        res = runner.invoke(app, [*eval_args(data, out, llm), "-j", jobs])
        assert res.exit_code == 3, res.output
        assert sorted(r["id"] for r in results(out)) == ["q0", "q2", "q4"]
        down.clear()
        res = runner.invoke(app, [*eval_args(data, out, llm), "-j", jobs])
        assert res.exit_code == 0, res.output
    for name in ("results.jsonl", "results.timings.jsonl"):
        assert (out / name).exists()
    assert (out / "results.jsonl").read_bytes() == (tmp_path / "clean" / "results.jsonl").read_bytes()
    assert [r["id"] for r in results(out)] == ["q0", "q1", "q2", "q3", "q4"]
    line = (out / "results.jsonl").read_text().splitlines()[0]
    assert '"elapsed"' not in line and '"latency"' not in line
    back = JsonlStore(out / "results.jsonl", EvalResult).read()  # the timings are put back on reading
    assert all(r.trajectory is not None and r.trajectory.elapsed > 0 for r in back)
    exports = {}
    for name in ("clean", "resumed"):  # the exports of the two runs are the same files too
        res = runner.invoke(app, ["export", "sft", "--trajectories", str(tmp_path / name / "results.jsonl"),
                                  "--out", str(tmp_path / f"sft-{name}")])
        assert res.exit_code == 0, res.output
        exports[name] = {p.name: p.read_bytes() for p in sorted((tmp_path / f"sft-{name}").iterdir())}
    assert exports["resumed"] == exports["clean"] and "trl_sft.jsonl" in exports["clean"]


def _faulting(srv: StubOpenAIServer, down: set[str]):
    real = srv._fault

    def fault(body):
        text = json.dumps(body)
        if any(d in text for d in down):
            with srv._lock:
                srv.requests += 1
            return "500"
        return real(body)

    return fault
