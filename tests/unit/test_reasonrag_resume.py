"""ReasonRAG after SIGKILL: the rerun finishes the same trees as an uninterrupted run, loses and
duplicates no record, and pays no stored LLM call twice (2 questions searched concurrently)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).parent

SCRIPT = textwrap.dedent('''
    import sys, threading, time
    from pathlib import Path
    from agentrag.llm.cache import CachedLLM
    from agentrag.records import QAItem
    from agentrag.synth.reasonrag import run_reasonrag
    from agentrag.testing import ScriptedLLM
    from test_reasonrag_pipeline import QUESTION, config, policy, retriever

    out, delay = Path(sys.argv[1]), float(sys.argv[2])
    lock = threading.Lock()

    class Counting:
        """A backend that pays (sleeps) for each call and logs it once it is done."""
        def __init__(self):
            self.inner, self.model = ScriptedLLM(default=policy), "scripted"
        def chat(self, messages, **kw):
            time.sleep(delay)
            res = self.inner.chat(messages, **kw)
            with lock, open(out / "paid_calls.txt", "a") as fh:
                fh.write("call\\n")
            return res

    out.mkdir(parents=True, exist_ok=True)
    other = QAItem(id="q2", question="Which person directed Film Alpha?", golden_answers=QUESTION.golden_answers)
    cfg = config().model_copy(update={"concurrency": 2})
    llm = CachedLLM(Counting(), out / "llm_cache.sqlite")
    run_reasonrag(cfg, out, llm=llm, retriever=retriever(), questions=[QUESTION, other])
''')


def _run(script: Path, out: Path, delay: float) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(script), str(out), str(delay)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _paid(out: Path) -> int:
    p = out / "paid_calls.txt"
    return len(p.read_text().splitlines()) if p.exists() else 0


def _records(out: Path, stage: str) -> dict[str, dict[str, object]]:
    lines = (out / f"{stage}.jsonl").read_text().splitlines()
    recs = [json.loads(line) for line in lines if line.strip()]
    assert len(recs) == len({r["id"] for r in recs}), f"{stage}: duplicated records"
    return {r["id"]: r for r in recs}


def test_sigkill_mid_search_then_rerun_equals_uninterrupted(tmp_path: Path) -> None:
    script = tmp_path / "synth.py"
    script.write_text(SCRIPT)
    ref = tmp_path / "ref"
    proc = _run(script, ref, 0.0)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    total = _paid(ref)
    assert total > 20

    out = tmp_path / "killed"
    proc = _run(script, out, 0.03)
    deadline = time.monotonic() + 60
    while _paid(out) < total // 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    paid_before = _paid(out)
    assert 0 < paid_before < total
    assert not (out / "trees.jsonl").exists() or len(_records(out, "trees")) < 2
    with sqlite3.connect(out / "llm_cache.sqlite") as db:
        cached = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    # answered but killed before the cache stored it: one per call in flight at most (2 questions,
    # each with its 2 SPRE rollouts at once)
    unsaved = paid_before - cached
    assert 0 <= unsaved <= 4

    proc = _run(script, out, 0.0)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert _records(out, "trees") == _records(ref, "trees")
    assert _records(out, "events").keys() == _records(ref, "events").keys()
    assert _records(out, "pairs") == _records(ref, "pairs")
    assert _paid(out) == total + unsaved, f"paid {_paid(out)} in all; uninterrupted {total}, unsaved {unsaved}"
