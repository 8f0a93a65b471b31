"""Kill the evaluation midway (SIGKILL) and rerun: finished items are not evaluated again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DRIVER = textwrap.dedent('''
    import sys, time
    from agentrag.agents import build_agent
    from agentrag.eval.runner import evaluate
    from agentrag.records import Passage, QAItem, ToolCall
    from agentrag.testing import FakeRetriever, ScriptedLLM

    run_dir, counter = sys.argv[1], sys.argv[2]
    items = [QAItem(id=f"q{i}", question=f"What is fact number {i}?", golden_answers=[f"fact {i}"], hops=1)
             for i in range(12)]

    def reply(messages, **kwargs):
        question = messages[1].content
        with open(counter, "a") as fh:  # one line per LLM call, naming the question
            fh.write(question + "\\n")
        time.sleep(0.15)
        if any(m.role == "tool" for m in messages):
            return "<answer>fact " + question.split()[-1].rstrip("?") + "</answer>"
        return ToolCall(name="dense_search", arguments={"query": question})

    passages = [Passage(id=f"p{i}", title=f"Fact {i}", text=f"fact number {i} is fact {i}") for i in range(12)]
    agent = build_agent("react", ScriptedLLM(default=reply), FakeRetriever(passages))
    evaluate(agent, items, run_dir, concurrency=2)
''')


def _ids(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line.endswith("}")]


def test_kill_and_resume(tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    run_dir, counter = tmp_path / "run", tmp_path / "calls.txt"
    results = run_dir / "results.jsonl"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(driver), str(run_dir), str(counter)], env=env)
    deadline = time.time() + 60
    while len(_ids(results)) < 4 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_first = set(_ids(results))
    assert 4 <= len(done_first) < 12, "the kill must land midway"
    calls_first = Counter(counter.read_text().splitlines())

    subprocess.run([sys.executable, str(driver), str(run_dir), str(counter)], env=env, check=True, timeout=120)
    calls = Counter(counter.read_text().splitlines())
    final = _ids(results)
    assert sorted(final) == sorted(f"q{i}" for i in range(12))  # all present, each once
    for i in range(12):
        q = f"What is fact number {i}?"
        if f"q{i}" in done_first:
            assert calls[q] == calls_first[q] == 2, f"q{i} was evaluated again after the resume"
        else:
            assert calls[q] - calls_first[q] == 2
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert all(r["em"] == 1.0 and r["steps"] == 1 for r in rows)
