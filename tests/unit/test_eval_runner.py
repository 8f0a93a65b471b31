from __future__ import annotations

import json
import threading
import time

import pytest

from agentrag.errors import RetrievalError
from agentrag.eval.judge import LLMJudge
from agentrag.eval.runner import evaluate, score_item, summarize
from agentrag.records import Hit, QAItem, Step, ToolCall, Trajectory
from agentrag.testing import ScriptedLLM


class FakeAgent:
    """Answers right for even-numbered items, with ``hops`` retrieval steps hitting passage p<i>."""

    name = "fake"

    def __init__(self, fail_ids=(), delay=0.0):
        self.calls: list[str] = []
        self.fail_ids = set(fail_ids)
        self.delay = delay
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    def run(self, item: QAItem) -> Trajectory:
        with self.lock:
            self.calls.append(item.id)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
            if item.id in self.fail_ids:
                raise RetrievalError("server down", is_retryable=True)
            n = int(item.id.split("#")[0][1:])
            steps = [Step(thought="t", action=ToolCall(name="search", arguments={"query": item.question}),
                          observation="o", hits=[Hit(id=f"p{n}", title=f"T{n}", text="x", score=1.0)])
                     for _ in range(item.hops or 1)]
            answer = item.golden_answers[0] if n % 2 == 0 else "wrong"
            return Trajectory(id=item.id, question=item.question, steps=steps, answer=answer)
        finally:
            with self.lock:
                self.in_flight -= 1


def items(n=6):
    return [QAItem(id=f"q{i}", question=f"question {i}?", golden_answers=[f"The answer {i}"], hops=2,
                   supporting_passage_ids=[f"p{i}", "zz"]) for i in range(n)]


def test_score_item():
    traj = Trajectory(id="q0", question="q", answer="answer 0",
                      steps=[Step(action=ToolCall(name="s"), hits=[Hit(id="p0", text="x", score=1)]),
                             Step(thought="no tool")])
    res = score_item(items(1)[0], traj)
    assert (res.em, res.f1, res.acc, res.recall, res.steps, res.correct) == (1.0, 1.0, 1.0, 0.5, 1, True)
    judged = score_item(items(1)[0], traj, LLMJudge(ScriptedLLM(['{"reason": "", "score": 0}'])))
    assert judged.judge == 0 and judged.correct is False  # auto: the judge decides when present
    assert score_item(items(1)[0], traj.model_copy(update={"answer": "answer 0 maybe"}), correct_by="acc").correct


def test_evaluate_resume_and_summary(tmp_path):
    agent = FakeAgent()
    results = evaluate(agent, items(6), tmp_path, concurrency=3)
    assert sorted(r.id for r in results) == [f"q{i}" for i in range(6)]
    assert len(agent.calls) == 6
    again = FakeAgent()
    results2 = evaluate(again, items(8), tmp_path, concurrency=3)
    assert sorted(again.calls) == ["q6", "q7"]  # finished items are not run again
    assert len(results2) == 8
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 8 and len({json.loads(x)["id"] for x in lines}) == 8
    m = summarize(results2, n_requested=8)
    assert m["n"] == 8 and m["em"] == 0.5 and m["recall"] == 0.5 and m["mean_steps"] == 2.0
    assert m["hops"]["by_hops"]["2"]["n"] == 8 and m["hops"]["collapse_rate"] == 0.0
    assert m["finish_reasons"] == {"answered": 8} and m["missing"] == 0


def test_failed_items_are_retried_on_rerun(tmp_path):
    seen = []
    res = evaluate(FakeAgent(fail_ids={"q1"}), items(3), tmp_path, on_result=seen.append)
    assert sorted(r.id for r in res) == ["q0", "q2"] and sorted(r.id for r in seen) == ["q0", "q2"]
    assert list(json.loads((tmp_path / "unfinished.json").read_text())) == ["q1"]
    assert summarize(res, n_requested=3)["missing"] == 1
    agent = FakeAgent()
    res = evaluate(agent, items(3), tmp_path)
    assert agent.calls == ["q1"] and len(res) == 3


def test_concurrency_is_used(tmp_path):
    agent = FakeAgent(delay=0.05)
    t0 = time.perf_counter()
    evaluate(agent, items(16), tmp_path, concurrency=8)
    assert agent.max_in_flight == 8
    assert time.perf_counter() - t0 < 16 * 0.05 / 2


def test_maxd_probes_are_run_and_diagnosed(tmp_path):
    decomposition = [{"question": "A >> b", "answer": "a"}, {"question": "c #1", "answer": "d"},
                     {"question": "e #2", "answer": "x"}]
    solved = QAItem(id="q2", question="Q", golden_answers=["x"], hops=3, metadata={"decomposition": decomposition})
    failed = QAItem(id="q3", question="Q", golden_answers=["x"], hops=3, metadata={"decomposition": decomposition})
    agent = FakeAgent()
    res = evaluate(agent, [solved, failed], tmp_path, maxd=True)
    assert sorted(agent.calls) == ["q2", "q2#L1", "q2#L2", "q3", "q3#L1", "q3#L2"]
    m = summarize(res)
    assert m["n"] == 2 and m["em"] == 0.5
    assert m["hops"]["maxd"] == 1.5  # q2 solved: depth 3; q3 and its probes wrong: depth 0


def test_bad_concurrency(tmp_path):
    from agentrag.errors import UserError

    with pytest.raises(UserError):
        evaluate(FakeAgent(), items(1), tmp_path, concurrency=0)
