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


def _src(r: EvalResult, source: str) -> EvalResult:
    return r.model_copy(update={"id": f"{source}-{r.id}", "metadata": {"source": source, "type": "x"}})


def test_per_dataset_rows_pool_runs_joined_by_commas(tmp_path: Path) -> None:
    # 2wiki: a real gain on 40 questions; musique: none (same scores); hotpotqa: a loss
    b_w = _run(tmp_path, "b_w", [_src(_res(i, 0.0), "2wiki") for i in range(40)])
    t_w = _run(tmp_path, "t_w", [_src(_res(i, 1.0 if i < 20 else 0.0), "2wiki") for i in range(40)])
    b_m = _run(tmp_path, "b_m", [_src(_res(i, 0.5), "musique") for i in range(40)])
    t_m = _run(tmp_path, "t_m", [_src(_res(i, 0.5), "musique") for i in range(40)])
    b_h = _run(tmp_path, "b_h", [_src(_res(i, 1.0), "hotpotqa") for i in range(30)])
    t_h = _run(tmp_path, "t_h", [_src(_res(i, 0.0 if i < 15 else 1.0), "hotpotqa") for i in range(30)])
    base, trained = f"{b_w},{b_m},{b_h}", f"{t_w},{t_m},{t_h}"
    res = compare(base, trained, resamples=500)
    assert res["n_paired"] == 110
    per = res["per_dataset"]
    assert {k: v["n"] for k, v in per.items()} == {"2wiki": 40, "hotpotqa": 30, "musique": 40}
    assert per["2wiki"]["f1_diff"]["mean"] == 0.5 and per["2wiki"]["f1_diff"]["ci95"][0] > 0
    assert per["musique"]["f1_diff"]["ci95"] == [0.0, 0.0] and not per["musique"]["f1_diff"]["excludes_0"]
    assert per["hotpotqa"]["f1_diff"]["ci95"][1] < 0 and per["hotpotqa"]["em_diff"]["mean"] == -0.5
    assert res["em_diff"]["mean"] == pytest.approx((20 - 15) / 110, abs=1e-3)
    md = to_markdown(res)
    assert "| 2wiki | 40 | 0.0 | 0.5 | +0.5000 [" in md and "| hotpotqa | 30 |" in md
    assert "fewer than the held-out protocol" not in md  # 110 >= 100
    small = to_markdown(compare(str(b_w), str(t_w), resamples=200))
    assert "40 paired questions, fewer than the held-out protocol's 100" in small


def test_a_question_in_two_runs_of_one_side_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path, "a", [_src(_res(i, 0.0), "2wiki") for i in range(3)])
    b = _run(tmp_path, "b", [_src(_res(i, 0.0), "2wiki") for i in range(2, 5)])
    with pytest.raises(UserError, match="also in another run"):
        compare(f"{a},{b}", str(a))
    assert main([f"{a},{b}", str(a)]) == 2
    assert "also in another run" in capsys.readouterr().err


def test_python_dash_m_runs_the_module_without_a_double_import_warning() -> None:
    """The documented command, ``python -m agentrag.eval.compare``: importing the ``agentrag.eval``
    package must not import ``compare`` first (runpy then warns on stderr that it was imported
    twice)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "agentrag.eval.compare", "--help"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and "trained" in done.stdout
    assert "RuntimeWarning" not in done.stderr and "found in sys.modules" not in done.stderr, done.stderr
