"""The loop's before/after comparison: metrics, protocol errors, the paired bootstrap CI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrag.errors import UserError
from agentrag.eval.compare import bootstrap_diff, compare, has_protocol_error, main, to_markdown
from agentrag.eval.result import EvalResult
from agentrag.records import Step, ToolCall, Trajectory


def _res(i: int, f1: float, finish: str = "answered", malformed: bool = False) -> EvalResult:
    steps = [Step(action=ToolCall(id="c", name="dense_search", arguments={"query": "q"}), observation="Doc 1")]
    if malformed:
        steps.append(Step(thought="<tool_call>{bad", error="tool call '{bad' is not valid JSON"))
    traj = Trajectory(id=str(i), question="q", steps=steps, finish_reason=finish)
    return EvalResult(id=str(i), question="q", golden_answers=["a"], f1=f1, em=float(f1 == 1.0), recall=0.5,
                      steps=1, finish_reason=finish, trajectory=traj)


def _run(tmp: Path, name: str, rows: list[EvalResult]) -> Path:
    d = tmp / name
    d.mkdir()
    (d / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in rows))
    return d


def test_protocol_errors_counted() -> None:
    assert has_protocol_error(_res(0, 0.0, malformed=True))
    assert has_protocol_error(_res(0, 0.0, finish="parse_error"))
    assert not has_protocol_error(_res(0, 1.0))


def test_bootstrap_interval_excludes_zero_only_for_a_real_gain() -> None:
    mean, lo, hi = bootstrap_diff([0.0] * 30, [1.0] * 20 + [0.0] * 10)
    assert mean == pytest.approx(0.6667, abs=1e-3) and lo > 0
    mean, lo, hi = bootstrap_diff([0.0, 1.0] * 15, [1.0, 0.0] * 15)
    assert mean == 0 and lo < 0 < hi
    with pytest.raises(ValueError):
        bootstrap_diff([], [])


def test_compare_pairs_runs_and_writes_table(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [_res(i, 0.0, malformed=i % 2 == 0) for i in range(20)])
    trained = _run(tmp_path, "trained", [_res(i, 1.0) for i in range(1, 21)])  # id 20 unpaired
    res = compare(base, trained)
    assert res["n_paired"] == 19 and res["base"]["protocol_error_rate"] > 0.4
    assert res["trained"]["protocol_error_rate"] == 0 and res["f1_diff"]["excludes_0"]
    md = to_markdown(res)
    assert "| F1 | 0.0 | 1.0 |" in md and "excludes 0" in md
    out = tmp_path / "cmp.md"
    assert main([str(base), str(trained), "--out", str(out), "--resamples", "200"]) == 0
    assert json.loads(out.with_suffix(".json").read_text())["n_paired"] == 19


def test_missing_run_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no results"):
        compare(tmp_path / "nope", tmp_path / "nope2")
