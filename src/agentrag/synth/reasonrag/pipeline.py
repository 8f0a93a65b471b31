"""ReasonRAG orchestration: questions -> MCTS trees -> greedy baseline -> preference pairs -> DPO
export and report, over a run directory.

Files (all append-only JSONL keyed by stable ids, written by the driver only):
``questions.jsonl``; ``events.jsonl`` (one :class:`IterationEvent` per MCTS iteration of every
question: the tree of a question is the replay of its events); ``trees.jsonl`` (the finished
tree of each question); ``greedy.jsonl`` (the reason_ground agent's trajectory per question);
``pairs.jsonl``; ``dpo/`` (TRL + LLaMA-Factory); ``metrics.json``, ``report.md``.

The search runs in rounds: each round maps one task per unfinished question through the executor
seam; a task replays the question's events, runs ``batch`` iterations (default 1) and returns the
new events, which the driver appends. A kill therefore loses at most the iterations in flight —
and with the LLM cache and derived seeds, their calls are answered from the cache on rerun. An
outage or a lost worker leaves the question unfinished (its events so far are kept); a rerun
continues it. The per-item functions are module-level over plain data, so on the Ray executor
they run in worker processes that rebuild the components with ``ReasonRagComponents.rebuild``
(see :mod:`agentrag.synth.worker`).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from agentrag.errors import RunError
from agentrag.exec import Executor, ThreadExecutor, run_items
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.records import PreferencePair, QAItem, Trajectory
from agentrag.runs import RunDir
from agentrag.synth.common import Progress
from agentrag.synth.reasonrag import stats
from agentrag.synth.reasonrag.config import ReasonRagConfig
from agentrag.synth.reasonrag.mcts import QuestionSearch, Status
from agentrag.synth.reasonrag.pairs import extract_pairs
from agentrag.synth.reasonrag.tree import IterationEvent, SearchTree
from agentrag.synth.worker import ComponentsTask

log = logging.getLogger(__name__)


def _raise_failures(failed: list[Any]) -> None:
    """Per-item functions record model failures and outages themselves; anything else escaping
    is a bug, raised after the driver has written what finished."""
    if failed:
        raise failed[0].error


@dataclass
class ReasonRagComponents:
    """What a run talks to: the policy LLM (expansions, rollouts, greedy agent), the retriever,
    and the judge LLM of Eq. 6 (default: the policy LLM)."""

    llm: LLM
    retriever: Retriever
    judge: LLM | None = None
    rebuild: Callable[[], ReasonRagComponents] | None = None  # the recipe a worker process builds them from


def _iterate(cfg: ReasonRagConfig, batch: int, c: ReasonRagComponents,
             task: tuple[QAItem, list[IterationEvent]]) -> tuple[list[IterationEvent], Status]:
    item, evs = task
    return QuestionSearch(item, c.llm, c.retriever, cfg, judge=c.judge).iterate(evs, batch)


def _greedy_one(cfg: ReasonRagConfig, c: ReasonRagComponents, item: QAItem) -> Trajectory:
    """The greedy reason_ground agent (temperature 0, same max rounds and k) on one question."""
    from agentrag.agents.config import ReasonGroundConfig
    from agentrag.agents.navigation import PlainNavigation
    from agentrag.agents.reason_ground import ReasonGroundAgent

    m = cfg.mcts
    agent = ReasonGroundAgent(c.llm, PlainNavigation(c.retriever),
                              ReasonGroundConfig(max_steps=max(2, m.max_iter), top_k=m.top_k, temperature=0.0,
                                                 max_tokens=m.max_tokens, seed=cfg.seed))
    return agent.run(item)


class ReasonRagPipeline:
    """Runs the stages over a run directory (see the module docstring)."""

    def __init__(self, run: RunDir, cfg: ReasonRagConfig, comps: ReasonRagComponents,
                 progress: Progress | None = None, executor: Executor | None = None, batch: int = 1) -> None:
        self.run_dir, self.cfg, self.c, self.progress = run, cfg, comps, progress
        self.executor: Executor = executor or ThreadExecutor(cfg.concurrency)
        self.batch = batch
        self.questions = run.stage("questions", QAItem)
        self.events = run.stage("events", IterationEvent)
        self.trees = run.stage("trees", SearchTree)
        self.greedy = run.stage("greedy", Trajectory)
        self.pairs = run.stage("pairs", PreferencePair)
        self.unfinished: set[str] = set()

    def _search(self, item: QAItem) -> QuestionSearch:
        return QuestionSearch(item, self.c.llm, self.c.retriever, self.cfg, judge=self.c.judge)

    # --- stages -------------------------------------------------------------------------------
    def search(self, items: list[QAItem]) -> None:
        """MCTS for every question without a finished tree, in rounds (see the module docstring)."""
        for it in items:
            self.questions.append(it)
        events: dict[str, list[IterationEvent]] = defaultdict(list)
        for ev in self.events:
            events[ev.question_id].append(ev)
        budget = self.cfg.mcts.iterations
        pending = [q for q in items if q.id not in self.trees]
        finished = len(items) - len(pending)
        total = len(items) * budget
        done = [finished * budget + sum(min(budget, len(events[q.id])) for q in pending)]
        if self.progress:
            self.progress("mcts", done[0], total)

        one = ComponentsTask(partial(_iterate, self.cfg, self.batch), self.c, self.c.rebuild,
                             what="ReasonRAG components")

        def write(task: tuple[QAItem, list[IterationEvent]], out: tuple[list[IterationEvent], Status]) -> None:
            item, (new, status) = task[0], out
            for ev in new:
                self.events.append(ev)
                events[item.id].append(ev)
            done[0] += len(new)
            if status in ("done", "exhausted"):
                tree = self._search(item).replay(events[item.id])
                tree.status = status
                self.trees.append(tree)
                done[0] += budget - tree.iterations
            elif status == "outage":
                self.unfinished.add(item.id)
            if self.progress:
                self.progress("mcts", done[0], total)

        while pending:
            failed = run_items(self.executor, one, [(q, list(events[q.id])) for q in pending], on_result=write)
            bugs = []
            for f in failed:
                if isinstance(f.error, RunError) and f.error.is_retryable:
                    log.warning("question %s: outage, left unfinished: %s", f.item[0].id, f.error)
                    self.unfinished.add(f.item[0].id)
                else:
                    bugs.append(f)
            _raise_failures(bugs)
            pending = [q for q in pending if q.id not in self.trees and q.id not in self.unfinished]

    def run_greedy(self, items: list[QAItem]) -> None:
        """The greedy reason_ground agent (temperature 0, same max rounds and k) per searched question."""
        if not self.cfg.greedy_baseline:
            return
        todo = [q for q in items if q.id in self.trees and q.id not in self.greedy]

        def write(item: QAItem, traj: Trajectory) -> None:
            if traj.finish_reason == "llm_error":  # an outage: the baseline stays unfinished
                log.warning("question %s: greedy baseline left unfinished: %s", item.id, traj.metadata.get("error"))
                return
            self.greedy.append(traj)

        task = ComponentsTask(partial(_greedy_one, self.cfg), self.c, self.c.rebuild, what="ReasonRAG components")
        failed = run_items(self.executor, task, todo, stage="greedy", progress=self.progress, on_result=write)
        bugs = []
        for f in failed:  # a lost worker: the baseline stays unfinished, like an outage
            if isinstance(f.error, RunError) and f.error.is_retryable:
                log.warning("question %s: greedy baseline left unfinished: %s", f.item.id, f.error)
            else:
                bugs.append(f)
        _raise_failures(bugs)

    def build_pairs(self) -> None:
        v, m = self.cfg.value, self.cfg.mcts
        for tree in self.trees:
            for p in extract_pairs(tree, alpha_label=v.alpha_label, min_gap=self.cfg.pairs.min_gap,
                                   max_iter=m.max_iter, include_untagged=self.cfg.pairs.include_untagged):
                self.pairs.append(p)

    def export(self) -> dict[str, Any]:
        if not self.cfg.export:
            return {"skipped": "export disabled in config"}
        pairs = self.pairs.read()
        if not pairs:
            return {"skipped": "no preference pair passed the filters", "exported": 0}
        from agentrag.export.dpo import write_dpo_export

        return write_dpo_export(self.run_dir.path / "dpo", pairs)

    # --- the whole run ------------------------------------------------------------------------
    def run(self, items: list[QAItem], name: str = "") -> dict[str, Any]:
        start = time.monotonic()
        self.search(items)
        self.run_greedy(items)
        self.build_pairs()
        exported = self.export()
        return self.write_report(name or self.run_dir.path.name, exported, time.monotonic() - start)

    def write_report(self, name: str, exported: dict[str, Any], elapsed: float) -> dict[str, Any]:
        metrics = stats.run_statistics(self.trees.read(), self.events.read(), self.pairs.read(), self.greedy.read())
        metrics.update({"name": name, "value": self.cfg.value.kind, "unfinished": sorted(self.unfinished),
                        "elapsed": round(elapsed, 1), "export": exported})
        self.run_dir.write_json("metrics.json", metrics)
        from agentrag.render import write_report

        write_report(self.run_dir.path, f"ReasonRAG run {name} ({self.cfg.value.kind} values)",
                     stats.report_sections(metrics))
        return metrics


__all__ = ["ReasonRagPipeline", "ReasonRagComponents"]
