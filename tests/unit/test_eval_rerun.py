"""A no-op rerun of ``eval`` (issue 27): when the last run scored every question and nothing
changed, ``run_eval`` returns the stored metrics and reads, recomputes and writes nothing; every
change (a result line appended or edited, the dataset edited, ``--limit``, another config, a run
left unfinished) runs the full resume. Through ``run_eval`` with the scripted fakes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_eval_outages import PASSAGES, plan_step_policy

import agentrag.eval.run as eval_run
from agentrag.eval.judge import LLMJudge
from agentrag.eval.result import EvalResult
from agentrag.eval.run import run_eval
from agentrag.eval.runner import EvalConfig
from agentrag.records import Message
from agentrag.testing import FakeRetriever, ScriptedLLM


def write_dataset(path: Path, n: int = 5, *, word: str = "capital") -> Path:
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is the {word} of country {i}?",
                                        "golden_answers": [f"City {i}"]}) + "\n" for i in range(n)))
    return path


class Eval:
    """Runs ``run_eval`` on the fakes and counts the statistics computed (``summarize``) and the
    questions the agent's LLM was asked."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.data = write_dataset(tmp_path / "qa.jsonl")
        self.out = tmp_path / "run"
        self.summaries = 0
        real = eval_run.summarize

        def counted(*a: Any, **kw: Any) -> dict[str, Any]:
            self.summaries += 1
            return real(*a, **kw)

        monkeypatch.setattr(eval_run, "summarize", counted)
        self.llm = ScriptedLLM(default=plan_step_policy)

    def __call__(self, policy: Any = plan_step_policy, **overrides: Any) -> dict[str, Any]:
        self.llm = ScriptedLLM(default=policy)
        cfg = EvalConfig(dataset=str(self.data), agent="plan_step", concurrency=1)
        return run_eval(cfg, self.out, llm=self.llm, retriever=FakeRetriever(PASSAGES),
                        judge=LLMJudge(ScriptedLLM(default='{"reason": "same", "score": 2}')), **overrides)

    def files(self) -> dict[str, tuple[int, bytes]]:
        return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(self.out.iterdir())
                if p.name != ".agentrag.lock"}  # the writer lock is taken by every invocation


@pytest.fixture()
def ev(tmp_path, monkeypatch) -> Eval:
    e = Eval(tmp_path, monkeypatch)
    first = e()
    assert first["n"] == 5 and first["unfinished"] == 0 and e.summaries == 1
    assert (e.out / ".finished.json").exists()
    time.sleep(0.01)  # a rewrite would show in the mtime
    return e


def test_a_no_op_rerun_reuses_the_finished_run_and_writes_nothing(ev):
    first = json.loads((ev.out / "metrics.json").read_text())
    before = ev.files()
    again = ev()
    assert again == first and ev.summaries == 1 and ev.llm.calls == 0
    assert ev.files() == before
    assert ev() == first and ev.summaries == 1  # and again


def test_a_deleted_report_is_written_again_from_the_stored_metrics(ev):
    html = (ev.out / "report.html").read_text()
    (ev.out / "report.html").unlink()
    ev()
    assert ev.summaries == 1 and (ev.out / "report.html").read_text() == html


def test_an_appended_result_line_recomputes(ev):
    line = (ev.out / "results.jsonl").read_text().splitlines()[0]
    extra = EvalResult.model_validate_json(line).model_copy(update={"id": "not-asked"})
    with (ev.out / "results.jsonl").open("a") as fh:
        fh.write(extra.model_dump_json() + "\n")
    m = ev()
    assert ev.summaries == 2 and m["n"] == 5  # recomputed; the extra line is not one of the questions
    ev()
    assert ev.summaries == 2  # stored again: the next rerun reuses it


def test_an_edited_result_line_recomputes(ev):
    path = ev.out / "results.jsonl"
    lines = path.read_text().splitlines()
    wrong = EvalResult.model_validate_json(lines[0]).model_copy(update={"em": 0.0, "prediction": "Nowhere"})
    path.write_text("\n".join([wrong.model_dump_json(), *lines[1:]]) + "\n")
    m = ev()
    assert ev.summaries == 2 and m["em"] == 0.8


def test_an_edited_dataset_recomputes(ev):
    write_dataset(ev.data, word="capital city")  # same ids, other questions: the key has the records' contents
    ev()
    assert ev.summaries == 2


def test_a_limit_or_another_config_recomputes(ev):
    assert ev(limit=3)["n"] == 3 and ev.summaries == 2
    assert ev()["n"] == 5 and ev.summaries == 3
    ev(correct_by="em")
    assert ev.summaries == 4


def test_a_run_left_unfinished_is_not_stored_and_its_rerun_finishes_it(tmp_path, monkeypatch):
    e = Eval(tmp_path, monkeypatch)

    def outage(messages: list[Message], **kwargs: Any) -> object:
        if "country 2" in (messages[1].content or ""):
            raise ConnectionError("connection reset by peer")
        return plan_step_policy(messages, **kwargs)

    assert e(outage)["unfinished"] == 1
    assert not (e.out / ".finished.json").exists()
    m = e()
    assert m["n"] == 5 and m["unfinished"] == 0 and e.llm.calls > 0 and e.summaries == 2
    e()
    assert e.summaries == 2  # now finished: reused
