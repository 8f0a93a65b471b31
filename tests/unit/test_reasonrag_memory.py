"""ReasonRAG's memory bound (issue 27, part 3): the search holds the events of the questions in
flight only (at most its window of started, unfinished questions; none of a question whose tree is
written, none of a question already finished on an earlier run), and the report streams
``trees.jsonl`` (pairs, flags, statistics and counts) with the output of the list-based code it
replaced, kept below as the reference (:class:`ListBasedSynth`)."""

from __future__ import annotations

import gc
import json
import statistics
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_reasonrag_pipeline import config, policy, retriever

from agentrag.eval.metrics import f1
from agentrag.records import Message, QAItem, Trajectory
from agentrag.synth.driver import (
    Pipeline,
    SynthBugs,
    SynthOutput,
    SynthRun,
    ids_key,
    run_pipeline,
    run_synthesizer,
)
from agentrag.synth.reasonrag import pipeline
from agentrag.synth.reasonrag.pipeline import RunFiles, Selected, build_pairs, export, greedy_catch_up, search
from agentrag.synth.reasonrag.run import ReasonRagSynth, run_reasonrag
from agentrag.synth.reasonrag.stats import _bin, _bins, summary
from agentrag.synth.reasonrag.tree import IterationEvent, SearchTree, pruned
from agentrag.testing import ScriptedLLM

# ----------------------------------------------------------------------------- the reference: list-based code


def old_run_statistics(trees: Sequence[SearchTree], events: Any, pairs: Any, greedy: Any) -> dict[str, Any]:
    """stats.run_statistics before the trees were streamed (verbatim but for the names)."""
    nodes = [n for t in trees for n in t.nodes if n.id != "r"]
    kept_nodes = [n for t in trees for n in t.nodes if n.id != "r" and n.id not in pruned(t)]
    calls_by_q: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for ev in events:
        calls_by_q[ev.question_id] += ev.usage.calls + (ev.node.value_usage.calls if ev.node else 0)
        outcomes[ev.outcome] += 1
    n_pairs = 0
    pairs_by_q: Counter[str] = Counter()
    pair_types: Counter[str] = Counter()
    pair_layers: Counter[str] = Counter()
    gaps = [0] * 10
    for p in pairs:
        n_pairs += 1
        pairs_by_q[str(p.metadata.get("question_id"))] += 1
        pair_types[str(p.metadata.get("type"))] += 1
        pair_layers[str(p.metadata.get("layer"))] += 1
        gaps[_bin(float(p.metadata.get("gap", 0.0)))] += 1
    tree_ids = {t.id for t in trees}
    greedy_answer: dict[str, str | None] = {}
    greedy_calls = 0
    for g in greedy:
        greedy_calls += g.usage.calls
        if g.id in tree_ids:
            greedy_answer[g.id] = g.answer
    compare: list[dict[str, Any]] = []
    for t in trees:
        leaves = t.answer_leaves()
        has_greedy = t.id in greedy_answer
        answer = greedy_answer.get(t.id)
        compare.append({"question_id": t.id, "best_leaf_f1": max((n.score or 0.0 for n in leaves), default=0.0),
                        "answer_leaves": len(leaves), "greedy_answer": answer,
                        "greedy_f1": f1(answer, t.golden_answers) if has_greedy else None})
    greedy_f1: list[float] = [c["greedy_f1"] for c in compare if c["greedy_f1"] is not None]
    total_calls = sum(calls_by_q.values())
    return {
        "questions": len(trees),
        "status": dict(Counter(t.status for t in trees)),
        "actions": dict(Counter(n.action for n in nodes)),
        "actions_kept": dict(Counter(n.action for n in kept_nodes)),
        "outcomes": dict(outcomes),
        "mcts_iterations": summary([t.iterations for t in trees]),
        "reasoning_rounds_of_answer_leaves": summary([n.depth for t in trees for n in t.answer_leaves()]),
        "response_tokens": summary([n.usage.completion_tokens for n in nodes]),
        "pairs": n_pairs,
        "pairs_per_question": round(n_pairs / len(trees), 3) if trees else None,
        "pair_types": dict(pair_types),
        "pair_layers": dict(pair_layers),
        "reward_gap_histogram": _bins(gaps),
        "llm_calls": {"total": total_calls,
                      "per_question": round(total_calls / len(trees), 2) if trees else None,
                      "per_kept_pair": round(total_calls / n_pairs, 2) if n_pairs else None,
                      "by_question": dict(calls_by_q),
                      "greedy_baseline": greedy_calls},
        "pairs_by_question": dict(pairs_by_q),
        "best_leaf_vs_greedy": {
            "mean_best_leaf_f1": round(statistics.fmean([c["best_leaf_f1"] for c in compare]), 3) if compare else None,
            "mean_greedy_f1": round(statistics.fmean(greedy_f1), 3) if greedy_f1 else None,
            "per_question": compare},
    }


def old_mcts_flags(trees: Sequence[SearchTree], error_expansion: int) -> dict[str, int]:
    out = {"error_expansion": error_expansion,
           "flagged_rollout": sum(1 for t in trees for n in t.nodes for e in n.estimates if e.flag)}
    return {k: v for k, v in out.items() if v}


class ListBasedSynth(ReasonRagSynth):
    """ReasonRagSynth.pipeline before the trees were streamed: every finished tree in one list."""

    def pipeline(self, ctx: SynthRun, cfg: Any, comps: Any, inputs: list[QAItem]) -> Pipeline:
        files = RunFiles(ctx.run)
        search(ctx, cfg, comps, files, inputs)
        if cfg.greedy_baseline:
            run_pipeline(ctx, Pipeline(steps=[greedy_catch_up(cfg, comps, files, inputs)], report=SynthOutput))
        ids = {q.id for q in inputs}
        trees = [t for t in files.trees.read() if t.id in ids]
        candidates, rejected = build_pairs(cfg, files, trees)

        def report() -> SynthOutput:
            pairs = Selected(files.pairs, lambda p: p.metadata.get("question_id") in ids)
            exported = export(cfg, files, pairs)
            done = {t.id for t in trees}
            tally = {"greedy": 0, "error_expansion": 0}

            def events() -> Iterator[IterationEvent]:
                for ev in files.events:
                    if ev.question_id in ids:
                        tally["error_expansion"] += ev.outcome == "error" and ev.question_id in done
                        yield ev

            def greedy() -> Iterator[Trajectory]:
                for g in files.greedy:
                    if g.id in ids:
                        tally["greedy"] += 1
                        yield g

            details = {"value": cfg.value.kind, **old_run_statistics(trees, events(), pairs, greedy())}
            n_pairs = int(details["pairs"])
            counts: dict[str, tuple[int, int, Mapping[str, int]]] = {
                "questions": (len(inputs), len(inputs), {}),
                "mcts": (len(inputs), len(trees), old_mcts_flags(trees, tally["error_expansion"])),
                "pairs": (candidates, n_pairs, dict(rejected)),
                "dpo": (n_pairs, int(exported.get("exported", 0)), {}),
            }
            if cfg.greedy_baseline:
                counts["greedy"] = (len(trees), tally["greedy"], {})
            return SynthOutput(counts=counts, export=exported, details=details)
        return Pipeline(steps=[], report=report, report_key=lambda: ids_key(ids))


# ----------------------------------------------------------------------------- scripted world

def questions(n: int, prefix: str = "q") -> list[QAItem]:
    return [QAItem(id=f"{prefix}{i}", question=f"Who directed Film Alpha (case {i})?", golden_answers=["John Smith"])
            for i in range(n)]


def flaky(messages: list[Message], **kw: object) -> str:
    """``policy``, with an empty output now and then (an ``error`` expansion, a flagged rollout)."""
    if int(kw.get("seed") or 0) % 7 == 3:
        return ""
    return policy(messages, **kw)


TIMING = {"wall_s", "started", "finished", "stage_s", "llm"}


def without_timings(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k not in TIMING}


def test_streamed_report_is_byte_identical_to_the_list_based_one(tmp_path: Path) -> None:
    """Through the real pipeline on a scripted model (empty outputs included): pairs.jsonl, the
    DPO export and metrics.json (timings aside) of the streamed code equal the list-based code's."""
    cfg = config()
    qs = questions(6)
    new_dir, old_dir = tmp_path / "new" / "run", tmp_path / "old" / "run"  # the same run name
    new = run_reasonrag(cfg, new_dir, llm=ScriptedLLM(default=flaky), retriever=retriever(), questions=qs)
    run_synthesizer(ListBasedSynth(), cfg, old_dir, llm=ScriptedLLM(default=flaky), retriever=retriever(),
                    questions=qs)
    assert new["pairs"] > 0 and new["outcomes"].get("error"), new["outcomes"]
    mcts = next(f for f in new["funnel"] if f["stage"] == "mcts")
    assert mcts["rejected"].get("error_expansion"), mcts
    a, b = (json.loads((d / "metrics.json").read_text().replace(str(d), "RUN")) for d in (new_dir, old_dir))
    assert json.dumps(without_timings(a)) == json.dumps(without_timings(b))
    assert set(a) - set(without_timings(a)) == set(b) - set(without_timings(b))
    for name in ("pairs.jsonl", "trees.jsonl", "dpo/trl_dpo.jsonl", "dpo/dpo_sharegpt.jsonl",
                 "dpo/dpo_alpaca.jsonl", "dpo/dataset_info.json"):
        assert (new_dir / name).read_bytes() == (old_dir / name).read_bytes(), name


def test_report_reads_no_tree_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, frozen_heap: None) -> None:
    """The report never reads trees.jsonl into a list (the old path called ``read()``)."""
    from agentrag.runs import JsonlStore

    real = JsonlStore.read

    def read(self: JsonlStore[Any]) -> list[Any]:
        assert self.path.name != "trees.jsonl", "trees.jsonl read into a list"
        return real(self)

    monkeypatch.setattr(JsonlStore, "read", read)
    m = run_reasonrag(config(), tmp_path / "run", llm=ScriptedLLM(default=policy), retriever=retriever(),
                      questions=questions(3))
    assert m["questions"] == 3 and m["pairs"] > 0


# ----------------------------------------------------------------------------- the search's events


class Watch:
    """At each tree the search writes: the IterationEvent objects alive, by question."""

    def __init__(self, run: Path, prefix: str) -> None:
        self.run, self.prefix = run, prefix
        self.stale = 0  # the most finished questions with live events at one check
        self.most = 0  # the most questions with live events at once
        self.replays = 0

    def finished(self) -> set[str]:
        path = self.run / "trees.jsonl"
        return {json.loads(line)["id"] for line in path.read_text().splitlines()} if path.exists() else set()

    def check(self, current: str) -> None:
        gc.collect()
        live = Counter(o.question_id for o in gc.get_objects()  # this test's questions only
                       if isinstance(o, IterationEvent) and o.question_id.startswith(self.prefix))
        done = self.finished()
        self.stale = max(self.stale, sum(1 for q in live if q in done and q != current))
        self.most = max(self.most, len(live))
        self.replays += 1


def watched(monkeypatch: pytest.MonkeyPatch, watch: Watch, window: int) -> None:
    """``watch.check`` at each append to trees.jsonl (the search writing a finished tree)."""
    from agentrag.runs import JsonlStore

    real = JsonlStore.append

    def append(self: JsonlStore[Any], record: Any) -> bool:
        if self.path.name == "trees.jsonl":
            watch.check(record.id)
        return real(self, record)

    monkeypatch.setattr(JsonlStore, "append", append)
    monkeypatch.setattr(pipeline, "search_window", lambda ctx: window)


@pytest.mark.parametrize("workers", [1, 3])
def test_search_holds_only_the_events_of_questions_in_flight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, frozen_heap: None,
                                                             workers: int) -> None:
    """12 questions, window 3: at every tree written, no event of a question whose tree is written
    is alive, and at most 3 questions have events in memory; a rerun with 6 more questions loads
    none of the 12 finished questions' events. With a thread pool, the executor may still hold the
    task of a result it yielded (its futures, ``2 * workers`` at most): that much slack, not more
    (the old search kept every question's events: 11 finished ones at the last tree)."""
    prefix = f"mem{workers}-"  # ids no other test's leftover events have
    watch = Watch(tmp_path / "run", prefix)
    watched(monkeypatch, watch, 3)
    cfg = config(concurrency=workers)
    m = run_reasonrag(cfg, tmp_path / "run", llm=ScriptedLLM(default=policy), retriever=retriever(),
                      questions=questions(12, prefix))
    slack = 0 if workers == 1 else 2 * workers
    assert m["questions"] == 12 and watch.replays == 12
    assert watch.stale <= slack and watch.most <= 3 + slack, (watch.stale, watch.most)
    m = run_reasonrag(cfg, tmp_path / "run", llm=ScriptedLLM(default=policy), retriever=retriever(),
                      questions=questions(18, prefix))
    assert m["questions"] == 18 and watch.replays == 18
    assert watch.stale <= slack and watch.most <= 3 + slack, (watch.stale, watch.most)


def test_window_is_independent_of_the_question_count_and_at_least_the_executor_limit() -> None:
    from agentrag.exec import ThreadExecutor

    class Ctx:
        executor = ThreadExecutor(workers=64)

    assert pipeline.search_window(Ctx()) == 4 * 128  # type: ignore[arg-type]
    Ctx.executor = ThreadExecutor(workers=1)
    assert pipeline.search_window(Ctx()) == pipeline.MIN_WINDOW  # type: ignore[arg-type]


def test_a_bug_frees_its_slot_every_other_question_is_searched(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A task that fails as a bug starts no next question; the search starts the rest anyway (a new
    flow), so with a window of 2 and two buggy questions every other question gets its tree."""
    monkeypatch.setattr(pipeline, "search_window", lambda ctx: 2)
    buggy = {"q0", "q3"}
    real = pipeline._iterate

    def iterate(cfg: Any, batch: int, c: Any, task: Any) -> Any:
        if task[0].id in buggy:
            raise KeyError("a bug in the search")
        return real(cfg, batch, c, task)

    monkeypatch.setattr(pipeline, "_iterate", iterate)
    cfg = config()
    with pytest.raises(SynthBugs) as info:
        run_reasonrag(cfg, tmp_path / "run", llm=ScriptedLLM(default=policy), retriever=retriever(),
                      questions=questions(7))
    assert set(info.value.bugs) == buggy
    trees = {json.loads(line)["id"] for line in (tmp_path / "run" / "trees.jsonl").read_text().splitlines()}
    assert trees == {f"q{i}" for i in range(7)} - buggy
