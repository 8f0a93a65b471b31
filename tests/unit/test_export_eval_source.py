"""``export sft`` reads an eval run's results.jsonl directly, with rejection-sampling filters
(issue 25, item 5)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.errors import UserError
from agentrag.eval.result import EvalResult
from agentrag.export.source import ResultFilter, read_sft_source
from agentrag.records import Step, ToolCall, Trajectory, write_jsonl


def _traj(i: int) -> Trajectory:
    return Trajectory(id=f"q{i}", question=f"Question {i}?", answer=f"A{i}", steps=[
        Step(thought="look it up", action=ToolCall(id="c0", name="dense_search", arguments={"query": f"q{i}"}),
             observation=f"Doc 1 fact {i}"),
        Step(thought=f"<answer>A{i}</answer>")])


def _results() -> list[EvalResult]:
    rows = [  # (correct, em, judge)
        (True, 1.0, 2), (False, 0.0, 0), (True, 0.0, 1), (None, 0.0, None)]
    out = [EvalResult(id=f"q{i}", question=f"Question {i}?", golden_answers=[f"A{i}"], prediction=f"A{i}",
                      correct=c, em=em, judge=j, trajectory=_traj(i)) for i, (c, em, j) in enumerate(rows)]
    out.append(EvalResult(id="q9", question="no trajectory", golden_answers=["x"], correct=True))
    return out


@pytest.mark.parametrize("flt,ids", [
    (ResultFilter(), ["q0", "q1", "q2", "q3"]),
    (ResultFilter(where="correct"), ["q0", "q2"]),
    (ResultFilter(where="em"), ["q0"]),
    (ResultFilter(min_judge=1), ["q0", "q2"]),
    (ResultFilter(min_judge=2), ["q0"]),
])
def test_eval_results_are_read_and_filtered(tmp_path, flt, ids):
    p = tmp_path / "results.jsonl"
    write_jsonl(p, _results())
    src = read_sft_source(p, flt)
    assert src.kind == "eval results" and src.rows == 5 and src.without_trajectory == 1
    assert [t.id for t in src.trajectories] == ids
    assert src.filtered_out == 4 - len(ids)


def test_filter_on_a_trajectories_file_is_refused(tmp_path):
    p = tmp_path / "trajs.jsonl"
    write_jsonl(p, [_traj(0)])
    assert [t.id for t in read_sft_source(p).trajectories] == ["q0"]
    with pytest.raises(UserError, match="carry no verdict"):
        read_sft_source(p, ResultFilter(where="correct"))


def test_malformed_eval_result_names_line_and_field(tmp_path):
    p = tmp_path / "results.jsonl"
    write_jsonl(p, _results()[:1])
    with p.open("a") as fh:
        fh.write(json.dumps({"id": "x", "question": "q", "golden_answers": "nope", "trajectory": None}) + "\n")
    with pytest.raises(UserError, match=r"results\.jsonl:2: EvalResult field 'golden_answers'"):
        read_sft_source(p)


def test_cli_exports_only_correct_eval_results(tmp_path):
    p = tmp_path / "run" / "results.jsonl"
    p.parent.mkdir()
    write_jsonl(p, _results())
    res = CliRunner().invoke(app, ["export", "sft", "--trajectories", str(p), "--out", str(tmp_path / "o"),
                                   "--where", "correct"])
    assert res.exit_code == 0, res.output
    assert "2 filtered out" in res.output and "1 without a trajectory" in res.output
    rows = [json.loads(x) for x in (tmp_path / "o" / "trl_sft.jsonl").read_text().splitlines()]
    assert [r["messages"][1]["content"] for r in rows] == ["Question 0?", "Question 2?"]
    res = CliRunner().invoke(app, ["export", "sft", "--trajectories", str(p), "--out", str(tmp_path / "o2"),
                                   "--where", "wrong"])
    assert res.exit_code == 2 and "--where must be" in res.output
