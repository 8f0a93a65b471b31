"""Reports and exports that stream the run's stage files (issue 27, part 3: peak memory): ReasonRAG's
statistics and the DPO export hold at most a few records at a time, and give the same output as
the list-based path. Each streaming test fails on code that reads the records into a list."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_export_dpo import make_pair, plain_pair
from test_reasonrag_pipeline import QUESTION, config, policy, retriever

from agentrag.errors import UserError
from agentrag.export.dpo import write_dpo_export
from agentrag.records import Message, PreferencePair, QAItem, Trajectory, Usage
from agentrag.runs import RunDir
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.synth.reasonrag.pipeline import RunFiles
from agentrag.synth.reasonrag.stats import histogram, run_statistics
from agentrag.synth.reasonrag.tree import IterationEvent
from agentrag.testing import ScriptedLLM


class Alive:
    """Counts the records of its streams still alive (weakref finalizers): ``max`` is the most
    ever alive at once."""

    def __init__(self) -> None:
        self.now = self.max = 0

    def _gone(self) -> None:
        self.now -= 1

    def stream(self, n: int, make: Callable[[int], Any]) -> Iterator[Any]:
        for i in range(n):
            rec = make(i)
            self.now += 1
            self.max = max(self.max, self.now)
            weakref.finalize(rec, self._gone)
            yield rec
            del rec
            gc.collect(0)


class Reiterable:
    """A fresh stream on each iteration (a run's stage file read once per pass)."""

    def __init__(self, alive: Alive, n: int, make: Callable[[int], Any]) -> None:
        self.alive, self.n, self.make = alive, n, make

    def __iter__(self) -> Iterator[Any]:
        return self.alive.stream(self.n, self.make)


def _pair(i: int) -> PreferencePair:
    p = make_pair(i) if i % 2 else plain_pair(i)
    return p.model_copy(update={"metadata": {"question_id": f"q{i % 7}", "type": "A-B" if i % 3 else "S-A",
                                             "layer": i % 2, "gap": (i % 11) / 10}})


def test_reasonrag_statistics_stream_the_records() -> None:
    n = 300
    alive = Alive()
    events = alive.stream(n, lambda i: IterationEvent(id=f"q{i % 5}-{i}", question_id=f"q{i % 5}", iteration=i,
                                                      selected="r", outcome="error" if i % 4 == 0 else "child",
                                                      usage=Usage(calls=2)))
    pairs = alive.stream(n, _pair)
    greedy = alive.stream(n, lambda i: Trajectory(id=f"g{i}", question="q", answer="a", usage=Usage(calls=3)))
    stats = run_statistics([], events, pairs, greedy)
    assert alive.max <= 5  # the record read, and the last of each finished loop (its loop variable)
    assert stats["outcomes"] == {"error": n // 4, "child": n - n // 4}
    assert stats["llm_calls"]["total"] == 2 * n and stats["llm_calls"]["by_question"]["q0"] == 2 * n // 5
    assert stats["pairs"] == n and stats["llm_calls"]["greedy_baseline"] == 3 * n
    assert sum(stats["pair_types"].values()) == n and stats["pairs_by_question"]["q0"] == len(range(0, n, 7))
    # the histogram of the streamed gaps is the one of the list of gaps (the same float bins)
    assert stats["reward_gap_histogram"] == histogram([(i % 11) / 10 for i in range(n)])


def test_dpo_export_streams_a_reiterable_and_writes_what_the_list_writes(tmp_path: Path) -> None:
    n = 120
    alive = Alive()
    streamed = write_dpo_export(tmp_path / "s", Reiterable(alive, n, _pair))
    assert alive.max <= 3
    listed = write_dpo_export(tmp_path / "l", [_pair(i) for i in range(n)])
    assert {k: v for k, v in streamed.items() if k != "files"} == {k: v for k, v in listed.items() if k != "files"}
    assert streamed["exported"] == n and streamed["sharegpt_cut"] == n // 2 and streamed["alpaca"] == n // 2
    for name in ("trl_dpo.jsonl", "dpo_sharegpt.jsonl", "dpo_alpaca.jsonl", "dataset_info.json", "README.md"):
        assert (tmp_path / "s" / name).read_bytes() == (tmp_path / "l" / name).read_bytes(), name
    # a one-shot iterator still exports every file (read into a list first)
    once = write_dpo_export(tmp_path / "o", iter([_pair(i) for i in range(n)]))
    assert (tmp_path / "o" / "dpo_alpaca.jsonl").read_bytes() == (tmp_path / "l" / "dpo_alpaca.jsonl").read_bytes()
    assert once["alpaca"] == n // 2


def test_dpo_export_bad_pair_in_the_stream_raises_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    bad = PreferencePair(id="bad", prompt=[Message(role="user", content="Q?")],
                         chosen=[Message(role="user", content="not an assistant turn")],
                         rejected=[Message(role="assistant", content="B")])
    with pytest.raises(UserError, match="'bad'.*assistant turn"):
        write_dpo_export(tmp_path / "x", [plain_pair(0), plain_pair(1), bad])
    assert not list((tmp_path / "x").glob("*.tmp")) and not (tmp_path / "x" / "trl_dpo.jsonl").exists()


def test_reasonrag_run_streams_to_the_statistics_and_export_of_the_lists(tmp_path: Path) -> None:
    """Through the real pipeline: the run's statistics and DPO export (streamed from the stage
    files) equal those computed from the records read into lists, the old path."""
    other = QAItem(id="q2", question="Who directed Film Alpha (again)?", golden_answers=["John Smith"])
    m = run_reasonrag(config(), tmp_path / "run", llm=ScriptedLLM(default=policy), retriever=retriever(),
                      questions=[QUESTION, other])
    assert m["pairs"] > 0
    with RunDir(tmp_path / "run", lock=False) as run:
        files = RunFiles(run)
        trees, events, pairs, greedy = (files.trees.read(), files.events.read(), files.pairs.read(),
                                        files.greedy.read())
    want = run_statistics(trees, events, pairs, greedy)
    assert {k: m[k] for k in want} == want
    write_dpo_export(tmp_path / "lists", pairs)
    for name in ("trl_dpo.jsonl", "dpo_sharegpt.jsonl", "dpo_alpaca.jsonl", "dataset_info.json"):
        assert (tmp_path / "run" / "dpo" / name).read_bytes() == (tmp_path / "lists" / name).read_bytes(), name
    counts = {f["stage"]: (f["in"], f["out"]) for f in m["funnel"]}
    assert counts["pairs"][1] == len(pairs) == counts["dpo"][0] and counts["greedy"] == (len(trees), len(greedy))


def _tracer_records(i: int) -> tuple[Any, Any, Any]:
    from agentrag.synth.tracer.schema import AtomicPair, AtomicRecord, DocRecord, Hop, HopRecord

    doc = DocRecord(id=f"d{i}", passage_id=f"p{i}", title="T", text="x", rank=i,
                    status="ok" if i % 3 else "failed", reason=None if i % 3 else "sample: parse_error bad")
    pairs = [AtomicPair(id=f"d{i}-a{j}", status="accepted" if (i + j) % 2 else "rejected",
                        reason=None if (i + j) % 2 else "atomic: leakage") for j in range(2)]
    atomic = AtomicRecord(id=f"d{i}", doc_id=f"d{i}", status="ok" if i % 4 else "failed",
                          reason=None if i % 4 else "atomic: context_limit", pairs=pairs, calls=2)
    tried = [Hop(level=2, template="inference", atomic_question="q", atomic_answer="a", doc_id=f"x{i}", question="q",
                 answer="a", reason="semantic: shortcut found") for _ in range(i % 3)]
    hop = HopRecord(id=f"d{i}-h2", chain_id=f"d{i}", level=2, status="verified" if i % 2 else "failed",
                    attempts=tried, calls=3)
    return doc, atomic, hop


def test_tracer_counts_stream_the_records_and_count_what_the_lists_count() -> None:
    from agentrag.synth.tracer.report import tracer_counts

    n = 200
    alive = Alive()
    docs = alive.stream(n, lambda i: _tracer_records(i)[0])
    atomic = alive.stream(n, lambda i: _tracer_records(i)[1])
    hops = {2: alive.stream(n, lambda i: _tracer_records(i)[2])}
    counts, details = tracer_counts(docs, [], atomic, hops, [], {"items": 0}, {"candidates": n})
    assert alive.max <= 5  # the record read, and the last of each finished loop
    lists = [_tracer_records(i) for i in range(n)]
    want = tracer_counts([d for d, _, _ in lists], [], [a for _, a, _ in lists], {2: [h for _, _, h in lists]}, [],
                         {"items": 0}, {"candidates": n})
    assert (counts, details) == want
    assert counts["sample"] == (n, n - len(range(0, n, 3)), {"sample: parse_error bad": len(range(0, n, 3))})
    assert counts["hop2"][2]["semantic: shortcut"] > 0 and counts["hop2"][2]["no related document"] > 0
    assert list(counts) == ["sample", "select", "atomic", "pairs", "hop2", "hop2.candidates", "export"]
