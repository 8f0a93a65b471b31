"""Questions advance independently (issue 21 item 5): a slow question never holds back a fast
one, and the executor's slots stay busy while work remains."""

from __future__ import annotations

import threading
import time

from test_reasonrag_pipeline import QUESTION, config, policy, retriever

from agentrag.exec import ThreadExecutor
from agentrag.records import QAItem
from agentrag.runs import RunDir
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.synth.reasonrag.pipeline import RunFiles
from agentrag.testing import ScriptedLLM

SLOW = QAItem(id="slow", question="Which person directed Film Alpha, slowly?", golden_answers=["John Smith"])


def test_a_slow_question_does_not_hold_back_a_fast_one(tmp_path):
    lock, in_flight, both = threading.Lock(), {"fast": 0, "slow": 0}, [False]

    def answer(messages, **kw):
        kind = "slow" if any("slowly" in (m.content or "") for m in messages) else "fast"
        with lock:
            in_flight[kind] += 1
            both[0] = both[0] or (in_flight["fast"] > 0 and in_flight["slow"] > 0)
        try:
            time.sleep(0.06 if kind == "slow" else 0.002)
            return policy(messages, **kw)
        finally:
            with lock:
                in_flight[kind] -= 1

    cfg = config().model_copy(update={"concurrency": 2, "greedy_baseline": False})
    m = run_reasonrag(cfg, tmp_path, llm=ScriptedLLM(default=answer), retriever=retriever(),
                      questions=[QUESTION, SLOW], executor=ThreadExecutor(2))
    assert m["unfinished"] == 0
    files = RunFiles(RunDir(tmp_path, lock=False))
    order = [ev.question_id for ev in files.events.read()]
    assert order.count("q1") == order.count("slow") == 8
    # in lockstep rounds the two would alternate; here the fast question finishes its whole search
    # while the slow one is still early in its own
    last_fast = max(i for i, q in enumerate(order) if q == "q1")
    assert order[:last_fast].count("slow") <= 3, order
    assert [t.id for t in files.trees.read()] == ["q1", "slow"]
    assert both[0]  # both slots used while both questions had work (a question's rollouts run at once)
